// Fitness for locks: a Redis that may evict keys, or is too old for the lock scripts, is refused.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "store/redis/connection.hpp"

namespace nxlock::store::redis {

// The oldest Redis whose scripts may read TIME and then write (effects
// replication is the default from 5.0 on) and that reports maxmemory-policy in
// INFO: the lock scripts need both.
inline constexpr int k_min_major = 5;
inline constexpr int k_min_minor = 0;

// Adds INFO server and INFO memory to `connection`'s setup (no round trip of
// their own), checked after every connect: a server with maxmemory above 0 and
// a policy other than noeviction, or older than k_min_major.k_min_minor, fails
// the connect with util::Error(config) naming `name`, the policy or version,
// and the fix. A server that refuses INFO (an ACL's NOPERM, a renamed command)
// is only warned about through `warn`, once per `warned` flag.
// The value of `field` in INFO's "field:value" lines, if present.
std::optional<std::string> info_field(std::string_view info, std::string_view field);

void add_fitness_checks(Connection& connection, const std::string& name,
                        std::function<void(const std::string&)> warn, std::shared_ptr<bool> warned);

}  // namespace nxlock::store::redis
