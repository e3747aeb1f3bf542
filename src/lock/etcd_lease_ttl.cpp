// etcd_lease_ttl: a renewal's -t against the lease's granted TTL and etcd's least TTL.
#include "lock/etcd_lease_ttl.hpp"

#include <optional>
#include <string>

#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

// The TTL etcd grants a lease asked for 1 s: its least. nullopt if it could not be asked.
std::optional<std::int64_t> least_lease_ttl(store::etcd::EtcdKv& kv) {
  try {
    const store::etcd::Lease lease = kv.grant(1);
    kv.revoke(lease.id);
    return lease.ttl;
  } catch (const util::Error& e) {
    util::trace(std::string("etcd: the least lease TTL not learnt: ") + e.what());
    return std::nullopt;
  }
}

}  // namespace

void check_renewal_ttl(store::etcd::EtcdKv& kv, std::int64_t ttl, std::int64_t granted) {
  if (ttl == granted) {
    return;
  }
  const auto least = least_lease_ttl(kv);
  if (ttl < granted && least == granted) {
    return;  // etcd granted its least for this ask too: the -t the lock was taken with, maybe
  }
  const std::string g = std::to_string(granted);
  throw util::Error(util::ErrorKind::usage, "-t " + std::to_string(ttl),
                    least == granted
                        ? "the lease's TTL is " + g + " s, etcd's least (granted for any -t up to " +
                              g + "), and a lease's TTL cannot change (use -t " + g + " or less)"
                        : "the lease's TTL is " + g +
                              " s, and a lease's TTL cannot change (use -t " + g +
                              ", as the lock was taken)");
}

}  // namespace nxlock::lock
