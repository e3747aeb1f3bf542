// etcd_listing: one range, grouped by lock key, the holders' TTLs pipelined.
#include "lock/etcd_listing.hpp"

#include <algorithm>
#include <map>

#include "lock/etcd_mutex.hpp"
#include "lock/queue_ticket.hpp"
#include "store/lock_listing.hpp"

namespace nxlock::lock {

std::vector<LockRow> list_etcd_locks(store::EtcdStore& store, std::string_view pattern,
                                     std::int64_t now_seconds) {
  // The literal start of the glob: everything the range must cover.
  std::size_t literal = pattern.find_first_of("*?[\\");
  const std::string_view start = pattern.substr(0, literal);
  struct Group {
    store::etcd::KeyValue holder;
    std::vector<store::etcd::KeyValue> keys;  // the holder's and its waiters'
  };
  std::map<std::string, Group> groups;
  for (auto& kv : store.range_prefix(start).kvs) {
    // KEY/<lease in hex>: anything else under the prefix is not one of the recipe's keys.
    const auto slash = kv.key.rfind('/');
    if (slash == std::string::npos || slash + 1 == kv.key.size() ||
        kv.key.find_first_not_of("0123456789abcdef", slash + 1) != std::string::npos) {
      continue;
    }
    std::string key = kv.key.substr(0, slash);
    if (!store::glob_match(pattern, key)) {
      continue;
    }
    Group& group = groups[key];
    if (group.keys.empty() || kv.create_revision < group.holder.create_revision) {
      group.holder = kv;
    }
    group.keys.push_back(std::move(kv));
  }
  std::vector<std::int64_t> leases;
  for (const auto& [key, group] : groups) {
    leases.push_back(group.holder.lease);
  }
  const auto ttls = store.kv().time_to_live_each(leases);
  std::vector<LockRow> rows;
  std::size_t i = 0;
  for (const auto& [key, group] : groups) {
    const auto& ttl = ttls[i++];
    const std::int64_t left = ttl ? std::max<std::int64_t>(0, ttl->left) : 0;
    LockRow row;
    row.key = key;
    row.holder = Holder::from_json(group.holder.value);
    row.expires_at = etcd_shown_expiry(now_seconds, left, group.holder.lease, row.holder);
    row.value = etcd_value(row.expires_at, group.holder.lease);
    row.fence = etcd_token(group.holder);
    row.waiters = static_cast<std::int64_t>(group.keys.size()) - 1;
    // The waiters in the order they came: each key's value is its ticket
    // (EtcdMutex::acquire) until it holds; empty from etcdctl lock.
    std::vector<store::etcd::KeyValue> waiting = group.keys;
    std::sort(waiting.begin(), waiting.end(),
              [](const auto& a, const auto& b) { return a.create_revision < b.create_revision; });
    for (const auto& kv : waiting) {
      if (kv.create_revision != group.holder.create_revision) {
        row.waiting.push_back({kv.value, details_of_ticket(kv.value)});
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace nxlock::lock
