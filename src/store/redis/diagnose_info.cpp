// The Redis diagnosis's checks that read only INFO and CONFIG GET's replies:
// the server's version, its persistence and its replication.
#include <hiredis/hiredis.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "store/redis/diagnose.hpp"
#include "store/redis/fitness.hpp"
#include "store/redis/reply.hpp"
#include "util/escape.hpp"

namespace nxlock::store::redis::doctor {

namespace {

long number_or(const std::optional<std::string>& text, long fallback) {
  return text ? std::strtol(text->c_str(), nullptr, 10) : fallback;
}

// CONFIG GET's value ([name, value]), or nullopt when refused or absent.
std::optional<std::string> config_value(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 2) {
    return std::nullopt;
  }
  return std::string(text_of(*reply.element[1]));
}

std::string minimum() {
  return std::to_string(redis::k_min_major) + "." + std::to_string(redis::k_min_minor);
}

}  // namespace

Check version_check(std::string_view info, bool& too_old) {
  const auto version = info_field(info, "redis_version");
  int major = 0;
  int minor = 0;
  if (!version || std::sscanf(version->c_str(), "%d.%d", &major, &minor) != 2) {
    return Check::warn("server version", "not reported",
                       "nxlock's locks need Redis " + minimum() + " or later");
  }
  const std::string detail = util::escape(*version, 40);
  if (major < redis::k_min_major || (major == redis::k_min_major && minor < redis::k_min_minor)) {
    too_old = true;
    return Check::fail("server version", detail,
                       "upgrade to Redis " + minimum() +
                           " or later: the lock scripts read TIME and then write");
  }
  return Check::ok("server version", detail);
}

Check persistence_check(std::string_view info, const redisReply& save,
                        const redisReply& appendonly) {
  const auto save_points = config_value(save);
  const auto aof = config_value(appendonly);
  const bool aof_on = aof ? *aof == "yes" : info_field(info, "aof_enabled") == "1";
  if (aof_on) {
    return Check::ok("persistence", "append-only file");
  }
  if (save_points && !save_points->empty()) {
    return Check::ok("persistence",
                     "RDB snapshots (save " + util::escape(*save_points, 60) + ")");
  }
  if (!save_points) {
    return Check::warn("persistence", "cannot tell (CONFIG GET refused)",
                       "make sure appendonly or save is set, or a restart loses every held lock");
  }
  return Check::warn(
      "persistence",
      "none: a restart of the server loses every held lock and stops the "
      "jobs run-locked runs under them",
      "set appendonly yes (or save points) if jobs must outlive a restart of the server");
}

Check replication_check(std::string_view info, int replicas) {
  const auto role = info_field(info, "role");
  if (role == "slave") {
    return Check::fail(
        "replication",
        "a replica of " + util::escape(info_field(info, "master_host").value_or("?"), 60) + ":" +
            util::escape(info_field(info, "master_port").value_or("?"), 8) +
            ": it refuses lock writes (READONLY)",
        "lock on the master: point the URL at it, or use redis+sentinel://");
  }
  // slaveN:ip=…,port=…,state=online,…: only those online confirm a WAIT.
  long online = 0;
  const long connected = number_or(info_field(info, "connected_slaves"), 0);
  for (long i = 0; i < connected; ++i) {
    const auto replica = info_field(info, "slave" + std::to_string(i));
    online += replica && replica->find("state=online") != std::string::npos ? 1 : 0;
  }
  std::string detail = util::escape(role.value_or("master"), 20) + ", " + std::to_string(online) +
                       (online == 1 ? " replica" : " replicas") + " online";
  if (replicas > 0) {
    detail += ", --replicas " + std::to_string(replicas);
  }
  if (online < replicas) {
    return Check::fail(
        "replication", detail,
        "every lock would be refused (69): bring replicas online, or lower --replicas");
  }
  return Check::ok("replication", detail);
}

}  // namespace nxlock::store::redis::doctor
