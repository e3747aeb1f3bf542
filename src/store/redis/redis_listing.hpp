// RedisListing: a Redis server's listing (LockListing): SCAN on every master (redis_listing.cpp).
#pragma once

#include <string_view>

#include "store/lock_listing.hpp"
#include "store/redis/redis_core.hpp"

namespace nxlock::store {

class RedisListing final : public LockListing {
 public:
  explicit RedisListing(RedisCore& core) : m_core(core) {}

  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override;

 private:
  // SCAN on one server, each batch of keys read in one pipelined round trip.
  void scan(redis::Connection& connection, std::string_view pattern, const Wanted& wanted,
            const Visit& visit);

  RedisCore& m_core;
};

}  // namespace nxlock::store
