// etcd_lease_ttl: whether a renewal's -t names the lease's TTL, as asked when it was granted or as granted.
#pragma once

#include <cstdint>

#include "store/etcd/etcd_kv.hpp"

namespace nxlock::lock {

// A lease's TTL cannot change: a renewal's `ttl` must be the one the lock was
// taken with, or the one etcd `granted` for it. They differ only where etcd
// raised the ask to its least TTL (1.5 election timeouts, rounded up to
// seconds), which it then grants for any ask up to it: so `ttl` below
// `granted` passes when `granted` is that least TTL (asked of etcd with a
// lease of 1 s, revoked at once). Throws util::Error(usage) naming both when
// `ttl` passes neither way, and as the client does.
void check_renewal_ttl(store::etcd::EtcdKv& kv, std::int64_t ttl, std::int64_t granted);

}  // namespace nxlock::lock
