// RedisCore: what a RedisStore's parts share (its steps, its waiters' queue, its leases,
// its listing): the connections, cluster routing, the command funnel and the one write path.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/connect_options.hpp"
#include "store/redis/connection.hpp"
#include "store/store.hpp"
#include "store/url.hpp"

namespace nxlock::store {

class RedisCore {
 public:
  // Connects, authenticates and selects the db. Throws util::Error naming the
  // redacted URL: unavailable (69) when refused or timed out, permission (77)
  // when authentication or TLS verification fails. A connection that breaks
  // later is re-established by the next operation (one attempt each).
  RedisCore(const Url& url, const ConnectOptions& options);
  ~RedisCore();

  // The URL with its password redacted: how messages name the server.
  const std::string& name() const { return m_url.redacted; }

  // Runs `commands` on the node that serves `key` (the URL's node if there is
  // no key or its slot is not known yet), following MOVED and ASK redirects.
  std::vector<redis::Reply> exchange(std::vector<redis::Command> commands, std::string_view key);
  // One command, routed by its key; an error reply becomes util::Error.
  redis::Reply run(const redis::Command& command);
  // Runs a lock write and, with --replicas, WAIT in the same round trip;
  // returns the write's reply. A write that `wrote` says the reply reports, but
  // that too few replicas confirmed, could vanish in a failover: `undo` takes
  // it back (best effort), and this throws unavailable (69).
  redis::Reply write(const redis::Command& command,
                     const std::function<bool(const redisReply&)>& wrote,
                     const std::function<void(const redisReply&)>& undo);
  // The connections to scan: each master of a cluster, else the one server
  // (redis_listing.cpp: only the listing asks).
  std::vector<redis::Connection*> masters();

  // A subscriber connection on key's wake channel, and on the ticket's turn
  // channel when there is one.
  std::unique_ptr<Watcher> subscribe(std::string_view key, std::string ticket);

  // Store::set_deadline.
  void set_deadline(std::optional<util::Micros> monotonic_deadline);
  // A step's lifetime (StepPolicy::lifetime), and its counter's (at least
  // k_fence_keep), as PEXPIRE arguments: whole milliseconds, rounded up; "0" for none.
  static std::string lock_keep_ms(util::Micros lifetime);
  static std::string counter_keep_ms(util::Micros lifetime);

 private:
  redis::Connection& node(const std::string& address);
  // With ConnectOptions::for_locks, adds the INFO checks (redis/fitness.hpp)
  // to a connection's setup.
  void check_fitness(redis::Connection& connection);
  // Throws the util::Error for an error reply to `command`: what our scripts
  // meet (no EVAL, CROSSSLOT, a bad counter) in words, the rest as the
  // connection layer maps it (throw_reply_error).
  [[noreturn]] void fail(const redisReply& reply, const redis::Command& command);

  Url m_url;
  std::shared_ptr<const net::Endpoint> m_endpoint;
  std::optional<std::string> m_password;
  // set_deadline's monotonic deadline, shared with the watchers, whose
  // reconnects it bounds too.
  std::shared_ptr<std::optional<util::Micros>> m_deadline;
  std::unique_ptr<redis::Connection> m_connection;  // the node the URL named
  // Cluster: connections to other nodes by "host:port", and the slots that
  // MOVED redirects taught us, for the rest of the invocation.
  std::map<std::string, std::unique_ptr<redis::Connection>> m_nodes;
  std::unordered_map<int, std::string> m_slots;
  int m_replicas = 0;
  double m_timeout_seconds = 2.0;
  bool m_for_locks = false;                                        // ConnectOptions::for_locks
  std::function<void(const std::string&)> m_warn;                  // ConnectOptions::warn
  std::shared_ptr<bool> m_warned = std::make_shared<bool>(false);  // INFO refused: said once
};

}  // namespace nxlock::store
