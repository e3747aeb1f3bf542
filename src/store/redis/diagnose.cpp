// A Redis deployment's diagnosis: reachable, TLS, auth, version, eviction, persistence,
// replicas, Sentinel and cluster state, clock and round trip. Reads only.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/diagnosis.hpp"
#include "store/redis/connection.hpp"
#include "store/redis/diagnose.hpp"
#include "store/redis/endpoint_setup.hpp"
#include "store/redis/fitness.hpp"
#include "store/redis/reply.hpp"
#include "util/escape.hpp"
#include "util/time.hpp"

namespace nxlock::store {

namespace redis::doctor {

using util::Error;

std::string_view text_of(const redisReply& reply) {
  if (reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS ||
      reply.type == REDIS_REPLY_ERROR) {
    return {reply.str, reply.len};
  }
  return {};
}

// The error a reply stands for (auth and ACL refusals: permission), if it is one.
std::optional<Error> reply_error(const redisReply& reply, const Command& command,
                                 const std::string& name) {
  if (reply.type != REDIS_REPLY_ERROR) {
    return std::nullopt;
  }
  try {
    redis::throw_reply_error(reply, command, name);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;  // not reached: throw_reply_error throws
}

}  // namespace redis::doctor

namespace {

using net::Endpoint;
using redis::Command;
using redis::Connection;
using redis::info_field;
using redis::Reply;
using redis::Setup;
using redis::doctor::reply_error;
using redis::doctor::text_of;
using util::Error;
using util::ErrorKind;
using util::Micros;

// A server clock further than this from ours is worth a warning: a lock's
// timestamp is whole seconds.
constexpr Micros k_clock_tolerance{1'000'000};

// "0.21 ms": a round trip on one host is well below seconds_text()'s milliseconds.
std::string millis_text(Micros duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

// One server: from reaching it to its clock. Appends to `checks`.
class ServerDiagnosis {
 public:
  ServerDiagnosis(Endpoint endpoint, const Url& url, const ConnectOptions& options,
                  std::vector<Check>& checks)
      : m_endpoint(std::move(endpoint)), m_url(url), m_options(options), m_checks(checks) {}

  void run() {
    if (!reach() || !log_in()) {
      return;
    }
    try {
      examine();
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::usage || e.kind() == ErrorKind::internal) {
        throw;
      }
      // The server went away (or refused a command) half-way: what was checked stands.
      m_checks.push_back(Check::stopping(
          e.kind() == ErrorKind::permission ? ErrorKind::permission : ErrorKind::unavailable,
          "connection", e.reason(), "run nxlock doctor again; see the server's log"));
    }
  }

 private:
  // Everything after the login, on the logged-in connection.
  void examine() {
    round_trip();
    const auto replies = m_connection->exchange({{{"INFO"}, {}},
                                                 {{"CONFIG", "GET", "save"}, {}},
                                                 {{"CONFIG", "GET", "appendonly"}, {}},
                                                 {{"CONFIG", "GET", "min-replicas-to-write"}, {}}});
    const std::optional<Error> refused = reply_error(*replies[0], {{"INFO"}, {}}, name());
    if (refused) {
      m_checks.push_back(Check::warn("INFO", refused->reason(),
                                     "allow INFO to this user (its ACL), so that the version, "
                                     "eviction, persistence and replicas can be checked"));
    } else {
      const std::string_view info = text_of(*replies[0]);
      m_checks.push_back(redis::doctor::version_check(info, m_too_old));
      eviction(info);
      m_checks.push_back(redis::doctor::persistence_check(info, *replies[1], *replies[2]));
      m_checks.push_back(redis::doctor::replication_check(info, m_options.replicas));
      cluster(info);
    }
    if (m_url.scheme == Url::Scheme::redis_sentinel) {
      m_checks.push_back(redis::doctor::failover_check(m_options.replicas, *replies[3]));
    }
    clock();
  }

  const std::string& name() const { return m_endpoint.name; }

  std::string where() const {
    return m_endpoint.unix_path.empty() ? host_port_text({m_endpoint.host, m_endpoint.port})
                                        : util::escape(m_endpoint.unix_path);
  }

  // A connection with no login: reachable, and the TLS handshake verified.
  bool reach() {
    Connection plain(m_endpoint, {});
    const Micros started = util::mono_now();
    try {
      plain.ensure_connected();
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::usage) {
        throw;
      }
      if (e.kind() == ErrorKind::permission) {  // the handshake's verification
        m_checks.push_back(Check::ok("reachable", where()));
        m_checks.push_back(Check::stopping(
            ErrorKind::permission, "TLS", e.reason(),
            "give the CA that signed the server's certificate (--cacert, --cacertdir), and "
            "--sni NAME if the certificate names another host"));
        return false;
      }
      m_checks.push_back(Check::stopping(
          ErrorKind::unavailable, "reachable", where() + ": " + e.reason(),
          "start the server, or check the URL's host and port, firewalls and --io-timeout"));
      return false;
    }
    m_checks.push_back(Check::ok(
        "reachable", where() + " (connected in " + millis_text(util::mono_now() - started) + ")"));
    if (m_endpoint.tls) {
      if (m_options.tls.insecure) {
        m_checks.push_back(Check::warn("TLS", "the certificate is not verified (--insecure)",
                                       "verify it: --cacert FILE instead of --insecure"));
      } else {
        const std::string& cas =
            !m_options.tls.cacert.empty() ? m_options.tls.cacert : m_options.tls.cacertdir;
        m_checks.push_back(Check::ok(
            "TLS", "certificate verified against " +
                       (cas.empty() ? std::string("the system's CAs") : util::escape(cas)) +
                       (m_options.tls.cert.empty() ? "" : ", client certificate presented")));
      }
    }
    return true;
  }

  // Logs in as the store does, fitness judged in the same round trip
  // (fitness.hpp decides what evicts locks): a server it refuses is judged
  // on a second connection without that check.
  bool log_in() {
    const auto password = redis::password_of(m_url, m_options);
    const Setup setup = redis::login_setup(m_url, password);
    m_connection = std::make_unique<Connection>(m_endpoint, setup);
    redis::add_fitness_checks(
        *m_connection, name(), [this](const std::string& text) { m_info_refused = text; },
        std::make_shared<bool>(false));
    const Command ping{{"PING"}, {}};
    std::optional<Error> failed;
    try {
      failed = reply_error(*m_connection->exchange({ping}).front(), ping, name());
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::config) {
        failed = e;
      } else {
        m_unfit = e.reason();
        m_connection = std::make_unique<Connection>(m_endpoint, setup);
        try {
          failed = reply_error(*m_connection->exchange({ping}).front(), ping, name());
        } catch (const Error& again) {
          failed = again;
        }
      }
    }
    if (!failed) {
      m_checks.push_back(Check::ok(
          "auth", password ? "accepted" + (m_url.user ? " for user " + util::escape(*m_url.user)
                                                      : std::string())
                           : "no password needed"));
      return true;
    }
    if (failed->kind() == ErrorKind::permission) {
      m_checks.push_back(Check::stopping(
          ErrorKind::permission, "auth",
          password ? failed->reason() : "the server requires a password, and none was given",
          password ? "check the password (--password-file, NXLOCK_PASSWORD) and the ACL user"
                   : "the server wants a password: --password-file FILE or NXLOCK_PASSWORD"));
    } else if (failed->reason().starts_with("not a Redis server")) {
      m_checks.push_back(Check::stopping(
          ErrorKind::unavailable, "protocol", failed->reason(),
          "another service listens there: check the URL's host and port"));
    } else {
      m_checks.push_back(Check::stopping(
          failed->kind() == ErrorKind::usage ? ErrorKind::usage : ErrorKind::unavailable, "auth",
          failed->reason(), "check the URL's database number and the server's log"));
    }
    return false;
  }

  // The best of three PINGs: one slow answer is not the network's usual.
  void round_trip() {
    Micros best = Micros::max();
    for (int i = 0; i < 3; ++i) {
      const Micros started = util::mono_now();
      m_connection->exchange({{{"PING"}, {}}});
      best = std::min(best, util::mono_now() - started);
    }
    const Micros timeout{static_cast<long long>(m_endpoint.timeout_seconds * 1e6)};
    if (best * 4 > timeout) {
      m_round_trip = Check::warn(
          "round trip", millis_text(best) + ", near --io-timeout " + util::seconds_text(timeout),
          "raise --io-timeout, or lock on a server nearer this host");
    } else {
      m_round_trip = Check::ok("round trip", millis_text(best));
    }
  }

  void eviction(std::string_view info) {
    const auto policy = info_field(info, "maxmemory_policy");
    const auto maxmemory = info_field(info, "maxmemory_human");
    std::string detail = util::escape(policy.value_or("not reported"), 40);
    if (maxmemory) {
      detail += " (maxmemory " + util::escape(*maxmemory, 20) + ")";
    }
    if (m_too_old) {
      // fitness refused the version first and never judged the policy.
      m_checks.push_back(Check::warn("maxmemory-policy", detail + ": not judged on this version",
                                     "upgrade, then run nxlock doctor again"));
    } else if (!m_unfit.empty()) {
      // fitness's reason is "maxmemory-policy is …: the server may …; set …":
      // the part after the first ": " is the advice.
      const auto colon = m_unfit.find(": ");
      m_checks.push_back(
          Check::fail("maxmemory-policy", detail,
                      colon == std::string::npos ? m_unfit : m_unfit.substr(colon + 2)));
    } else if (!m_info_refused.empty() || !policy) {
      m_checks.push_back(Check::warn("maxmemory-policy", detail + ": cannot be judged",
                                     "make sure it is noeviction (or maxmemory 0)"));
    } else {
      m_checks.push_back(Check::ok("maxmemory-policy", detail));
    }
  }

  void cluster(std::string_view info) {
    if (info_field(info, "cluster_enabled") != "1") {
      return;
    }
    const Command command{{"CLUSTER", "INFO"}, {}};
    const auto reply = m_connection->exchange({command});
    if (const auto refused = reply_error(*reply.front(), command, name())) {
      m_checks.push_back(Check::warn("cluster", "CLUSTER INFO refused: " + refused->reason(),
                                     "allow CLUSTER INFO to this user to check the cluster"));
      return;
    }
    const std::string_view text = text_of(*reply.front());
    const auto state = info_field(text, "cluster_state").value_or("unknown");
    const std::string detail = "cluster_state " + util::escape(state, 20) + ", " +
                               info_field(text, "cluster_known_nodes").value_or("?") + " nodes, " +
                               info_field(text, "cluster_size").value_or("?") +
                               " masters serving slots";
    if (state == "ok") {
      m_checks.push_back(Check::ok("cluster", detail));
    } else {
      m_checks.push_back(Check::fail(
          "cluster", detail,
          "locks whose slots have no reachable master fail (69): redis-cli --cluster check"));
    }
  }

  // The server's TIME against this host's clock, taken halfway through the
  // round trip; then the round trip measured before.
  void clock() {
    const Command time{{"TIME"}, {}};
    const Micros before = util::wall_now();
    const auto reply = m_connection->exchange({time});
    const Micros after = util::wall_now();
    if (const auto refused = reply_error(*reply.front(), time, name())) {
      m_checks.push_back(Check::warn("clock", "TIME refused: " + refused->reason(),
                                     "allow TIME to this user: the lock commands need it"));
    } else {
      const Micros offset =
          redis::time_of(*reply.front(), name()) - (before + (after - before) / 2);
      const Micros size = offset < Micros(0) ? -offset : offset;
      const std::string detail =
          "the server's is " +
          (size < Micros(1'000'000) ? millis_text(size) : util::seconds_text(size)) +
          (offset < Micros(0) ? " behind" : " ahead of") + " this host's";
      if (size > k_clock_tolerance) {
        m_checks.push_back(Check::warn(
            "clock", detail,
            "keep both in step (NTP): locks judge expiry by the server's clock, and by this "
            "host's with --clock local"));
      } else {
        m_checks.push_back(Check::ok("clock", detail));
      }
    }
    m_checks.push_back(m_round_trip);
  }

  Endpoint m_endpoint;
  const Url& m_url;
  const ConnectOptions& m_options;
  std::vector<Check>& m_checks;
  std::unique_ptr<Connection> m_connection;
  std::string m_unfit;         // fitness's refusal, if it refused the server
  std::string m_info_refused;  // fitness's warning that INFO was refused
  bool m_too_old = false;      // older than fitness.hpp's minimum
  Check m_round_trip;
};

}  // namespace

Diagnosis diagnose_redis(const Url& url, const ConnectOptions& options) {
  Diagnosis diagnosis;
  diagnosis.backend = url.redacted;
  Endpoint endpoint = redis::endpoint_of(url, options);
  if (url.scheme == Url::Scheme::redis_sentinel) {
    const auto master = redis::doctor::ask_sentinels(url, options, endpoint.tls, diagnosis.checks);
    if (!master) {
      return diagnosis;
    }
    // The master the Sentinels named, diagnosed as a server of its own.
    endpoint.host = master->host;
    endpoint.port = master->port;
    endpoint.name = url.redacted + " (master " + host_port_text(*master) + ")";
  }
  ServerDiagnosis(std::move(endpoint), url, options, diagnosis.checks).run();
  return diagnosis;
}

}  // namespace nxlock::store
