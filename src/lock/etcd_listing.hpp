// etcd_listing: the locks of etcd's recipe under a prefix, as `nxlock list` rows.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "lock/list_locks.hpp"
#include "store/etcd/etcd_store.hpp"

namespace nxlock::lock {

// Every lock KEY (held by KEY/<lease>, the lowest create revision under it)
// whose KEY matches the glob `pattern`: one range over the pattern's literal
// start, then the holders' leases' TTLs in one pipelined round trip. Waiters
// are the other keys under KEY/, in the order they came, each with what its
// ticket tells (none for etcdctl's). Sorted by key. Throws util::Error as the client does.
std::vector<LockRow> list_etcd_locks(store::EtcdStore& store, std::string_view pattern,
                                     std::int64_t now_seconds);

}  // namespace nxlock::lock
