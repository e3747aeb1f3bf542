// A redis+sentinel:// URL's diagnosis: what each of its Sentinels says about the master.
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/diagnose.hpp"
#include "util/escape.hpp"

namespace nxlock::store::redis::doctor {

namespace {

using util::Error;
using util::ErrorKind;

// Fewer Sentinels than this cannot outvote one that is down or partitioned.
constexpr long k_min_sentinels = 3;

}  // namespace

std::optional<HostPort> ask_sentinels(const Url& url, const ConnectOptions& options,
                                      const std::shared_ptr<net::TlsContext>& tls,
                                      std::vector<Check>& checks) {
  std::optional<HostPort> master;
  std::optional<Error> last_error;
  bool disagree = false;
  std::vector<std::vector<std::string>> setup;
  if (options.sentinel_password) {
    setup.push_back({"AUTH", *options.sentinel_password});
  }
  const Command command{{"SENTINEL", "MASTER", url.master}, {}};
  for (const HostPort& sentinel : url.sentinels) {
    net::Endpoint endpoint;
    endpoint.name = url.redacted + " (Sentinel " + host_port_text(sentinel) + ")";
    endpoint.host = sentinel.host;
    endpoint.port = sentinel.port;
    endpoint.timeout_seconds = options.timeout_seconds;
    endpoint.tls = tls;
    const std::string name = "Sentinel " + host_port_text(sentinel);
    std::optional<Error> failed;
    Reply reply;
    try {
      Connection connection(endpoint, setup);
      reply = std::move(connection.exchange({command}).front());
      failed = reply_error(*reply, command, endpoint.name);
    } catch (const Error& e) {
      failed = e;
    }
    if (failed) {
      last_error = failed;
      const bool unknown = failed->reason().find("No such master") != std::string::npos;
      checks.push_back(Check::warn(
          name,
          unknown ? "does not know master '" + util::escape(url.master) + "'" : failed->reason(),
          unknown ? "check the master's name in the URL (SENTINEL MASTERS lists them)"
                  : "start it, or leave it out of the URL"));
      continue;
    }
    // A flat list of field, value, field, value…
    auto field = [&reply](std::string_view wanted) -> std::string {
      for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
        if (text_of(*reply->element[i]) == wanted) {
          return std::string(text_of(*reply->element[i + 1]));
        }
      }
      return {};
    };
    const HostPort address{field("ip"),
                           static_cast<int>(std::strtol(field("port").c_str(), nullptr, 10))};
    const long sentinels = std::strtol(field("num-other-sentinels").c_str(), nullptr, 10) + 1;
    const std::string flags = field("flags");
    const std::string detail = "master '" + util::escape(url.master) + "' at " +
                               host_port_text(address) + " (" + util::escape(flags, 40) + "), " +
                               field("num-slaves") +
                               (field("num-slaves") == "1" ? " replica, " : " replicas, ") +
                               std::to_string(sentinels) + " Sentinels, quorum " + field("quorum");
    if (flags.find("s_down") != std::string::npos || flags.find("o_down") != std::string::npos) {
      checks.push_back(Check::fail(name, detail,
                                   "the master is down: a failover should follow; "
                                   "see the Sentinels' logs"));
    } else if (sentinels < k_min_sentinels) {
      checks.push_back(Check::warn(
          name, detail, "run at least 3 Sentinels: a failover needs a majority of them"));
    } else {
      checks.push_back(Check::ok(name, detail));
    }
    if (master && (master->host != address.host || master->port != address.port)) {
      disagree = true;
    }
    master = master.value_or(address);
  }
  if (!master) {
    const ErrorKind kind = last_error && last_error->kind() == ErrorKind::permission
                               ? ErrorKind::permission
                               : ErrorKind::unavailable;
    checks.push_back(Check::stopping(
        kind, "Sentinels",
        "none of the URL's Sentinels told where master '" + util::escape(url.master) + "' is",
        kind == ErrorKind::permission ? "give the Sentinels' password: --sentinel-password-file"
                                      : "start the Sentinels, or fix the URL"));
  } else if (disagree) {
    checks.push_back(Check::fail("Sentinels", "they disagree on where the master is",
                                 "a failover may be under way: run nxlock doctor again"));
  }
  return master;
}

Check failover_check(int replicas, const redisReply& min_replicas_reply) {
  if (replicas > 0) {
    return Check::ok("failover", "each lock write waits for " + std::to_string(replicas) +
                                     (replicas == 1 ? " replica" : " replicas") + " (--replicas)");
  }
  // CONFIG GET's [name, value]; refused or absent: cannot tell.
  const bool answered = min_replicas_reply.type == REDIS_REPLY_ARRAY &&
                        min_replicas_reply.elements >= 2;
  const long min_replicas =
      answered ? std::strtol(std::string(text_of(*min_replicas_reply.element[1])).c_str(),
                             nullptr, 10)
               : 0;
  if (min_replicas > 0) {
    return Check::ok("failover", "the master refuses writes with fewer than " +
                                     std::to_string(min_replicas) +
                                     " replicas connected (min-replicas-to-write)");
  }
  // Man page, --replicas: the promoted replica may never have seen the lock,
  // and the old master takes the holder's renewals until it is demoted.
  return Check::warn(
      "failover",
      std::string("a failover can split a lock in two: no --replicas, and the master's "
                  "min-replicas-to-write is ") +
          (answered ? "0" : "unknown (CONFIG GET refused)"),
      "give --replicas 1 (each lock write waits for a replica), or set "
      "min-replicas-to-write 1 and min-replicas-max-lag on every master");
}

}  // namespace nxlock::store::redis::doctor
