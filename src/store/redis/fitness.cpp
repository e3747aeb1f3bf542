// Fitness for locks: INFO's maxmemory-policy and version, read in the connection's setup.
#include "store/redis/fitness.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store::redis {

std::optional<std::string> info_field(std::string_view info, std::string_view field) {
  std::size_t at = 0;
  while (at < info.size()) {
    const std::size_t end = std::min(info.find('\n', at), info.size());
    std::string_view line = info.substr(at, end - at);
    if (line.ends_with('\r')) {
      line.remove_suffix(1);
    }
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return std::string(line.substr(field.size() + 1));
    }
    at = end + 1;
  }
  return std::nullopt;
}

namespace {

using util::Error;
using util::ErrorKind;

// The value of `field` in an INFO reply, if present.
std::optional<std::string> reply_field(const redisReply& reply, std::string_view field) {
  if (reply.type != REDIS_REPLY_STRING && reply.type != REDIS_REPLY_STATUS) {
    return std::nullopt;
  }
  return info_field(std::string_view(reply.str, reply.len), field);
}

// True (after warning once) when INFO was refused: the check cannot be made.
bool refused(const redisReply& reply, const std::string& name,
             const std::function<void(const std::string&)>& warn, bool& warned) {
  if (reply.type != REDIS_REPLY_ERROR) {
    return false;
  }
  // Refused for want of a password: the login's own check says so, alone.
  const bool needs_password = std::string_view(reply.str, reply.len).starts_with("NOAUTH");
  if (!warned && warn && !needs_password) {
    warned = true;
    warn("warning: " + name + ": INFO refused (" +
         util::escape(std::string_view(reply.str, reply.len), 80) +
         "): cannot check that the server evicts no locks (maxmemory-policy noeviction) and "
         "runs Redis " +
         std::to_string(k_min_major) + "." + std::to_string(k_min_minor) + " or later");
  }
  return true;
}

void check_server(const redisReply& reply, const std::string& name) {
  const auto version = reply_field(reply, "redis_version");
  if (!version) {
    return;  // not Redis's INFO: nothing to judge
  }
  int major = 0;
  int minor = 0;
  if (std::sscanf(version->c_str(), "%d.%d", &major, &minor) != 2) {
    return;
  }
  if (major > k_min_major || (major == k_min_major && minor >= k_min_minor)) {
    return;
  }
  throw Error(ErrorKind::config, name,
              "Redis " + util::escape(*version, 40) + " is too old for nxlock's locks (their " +
                  "scripts read TIME and then write, which needs Redis " +
                  std::to_string(k_min_major) + "." + std::to_string(k_min_minor) +
                  " or later); upgrade the server");
}

void check_memory(const redisReply& reply, const std::string& name) {
  const auto maxmemory = reply_field(reply, "maxmemory");
  const auto policy = reply_field(reply, "maxmemory_policy");
  if (!maxmemory || !policy || *maxmemory == "0" || *policy == "noeviction") {
    return;
  }
  const auto human = reply_field(reply, "maxmemory_human");
  throw Error(ErrorKind::config, name,
              "maxmemory-policy is " + util::escape(*policy, 40) + " with maxmemory " +
                  util::escape(human.value_or(*maxmemory), 40) +
                  ": the server may evict a held lock; set maxmemory-policy noeviction (or "
                  "maxmemory 0)");
}

}  // namespace

void add_fitness_checks(Connection& connection, const std::string& name,
                        std::function<void(const std::string&)> warn,
                        std::shared_ptr<bool> warned) {
  connection.add_setup_check({"INFO", "server"}, [name, warn, warned](const redisReply& reply) {
    if (!refused(reply, name, warn, *warned)) {
      check_server(reply, name);
    }
  });
  connection.add_setup_check({"INFO", "memory"}, [name, warn, warned](const redisReply& reply) {
    if (!refused(reply, name, warn, *warned)) {
      check_memory(reply, name);
    }
  });
}

}  // namespace nxlock::store::redis
