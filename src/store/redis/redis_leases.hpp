// RedisLeases: a Redis server's leased holders (SharedLeases: shared and slots), each step
// one Lua script over the lock, its counter, the lease set and the queue (redis_leases.cpp).
#pragma once

#include <cstdint>
#include <string_view>

#include "store/redis/redis_core.hpp"
#include "store/store.hpp"

namespace nxlock::store {

class RedisLeases final : public SharedLeases {
 public:
  explicit RedisLeases(RedisCore& core) : m_core(core) {}

  Take take(const Keys& keys, const TakeRequest& request, StepPolicy policy) override;
  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
             StepPolicy policy) override;
  bool release(const Keys& keys, const LeaseMatch& lease, StepPolicy policy) override;
  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override;
  LeaseSet read(const Keys& keys) override;

 private:
  RedisCore& m_core;
};

}  // namespace nxlock::store
