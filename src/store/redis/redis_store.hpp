// RedisStore: the Store interface over one Redis connection (TCP, unix socket or TLS).
// redis_store.cpp connects and routes, redis_steps.cpp has the steps,
// redis_queue.cpp the waiters' queue, scripts.cpp their Lua.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include "store/lock_listing.hpp"
#include "store/make_store.hpp"
#include "store/redis/connection.hpp"
#include "store/store.hpp"
#include "store/url.hpp"

namespace nxlock::store {

// The queue, the shared leases and the listing are private: the lock layer
// reaches them through queue(), shared() and listing().
class RedisStore final : public Store,
                         private WaitersQueue,
                         private SharedLeases,
                         private LockListing {
 public:
  // Connects, authenticates and selects the db. Throws util::Error naming the
  // redacted URL: unavailable (69) when refused or timed out, permission (77)
  // when authentication or TLS verification fails. A connection that breaks
  // later is re-established by the next operation (one attempt each).
  RedisStore(const Url& url, const ConnectOptions& options);
  ~RedisStore() override;

  std::string describe() const override { return m_url.redacted; }
  SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                            std::optional<std::string_view> counter = {}) override;
  std::optional<std::string> get(std::string_view key) override;
  Swap get_and_set(std::string_view key, std::string_view value,
                   std::optional<Takeover> takeover = {}) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;  // and PUBLISH, in one trip
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence = {}) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence = {}) override;
  WaitersQueue* queue() override { return this; }
  SharedLeases* shared() override { return this; }
  LockListing* listing() override { return this; }
  util::Micros now() override;  // the server's TIME
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override;
  void keep_keys_for(util::Micros lifetime) override { m_keep = lifetime; }
  void decide_on_own_clock(bool yes) override { m_own_clock = yes; }

 private:
  // The waiters' queue (WaitersQueue).
  QueuedSet take_or_queue(std::string_view key, std::string_view value, std::string_view counter,
                          std::string_view queue, std::string_view ticket, bool waiting,
                          util::Micros lease) override;
  bool release_and_wake(std::string_view key, std::string_view expected, const Fence& fence,
                        std::string_view queue) override;
  void leave(std::string_view key, std::string_view queue, std::string_view ticket) override;
  std::unique_ptr<Watcher> watch_turn(std::string_view key, std::string ticket) override;

  // The shared leases (SharedLeases), in redis_shared.cpp.
  Take take(const Keys& keys, const TakeRequest& request) override;
  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry) override;
  bool release(const Keys& keys, const LeaseMatch& lease) override;
  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override;
  LeaseSet read(const Keys& keys) override;
  // The listing (LockListing, redis_listing.cpp): SCAN on every master.
  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override;
  // The connections to scan: each master of a cluster, else the one server.
  std::vector<redis::Connection*> masters();
  // SCAN on one server, each batch of keys read in one pipelined round trip.
  void scan(redis::Connection& connection, std::string_view pattern, const Wanted& wanted,
            const Visit& visit);

  // A subscriber connection on key's wake channel, and on the ticket's turn
  // channel when there is one.
  std::unique_ptr<Watcher> subscribe(std::string_view key, std::string ticket);

  Url m_url;
  std::shared_ptr<const redis::Endpoint> m_endpoint;
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
  bool m_queue_forbidden = false;  // the ACL refused the queue's script once: no more tries
  double m_timeout_seconds = 2.0;
  bool m_for_locks = false;                                        // ConnectOptions::for_locks
  std::function<void(const std::string&)> m_warn;                  // ConnectOptions::warn
  std::shared_ptr<bool> m_warned = std::make_shared<bool>(false);  // INFO refused: said once
  util::Micros m_keep{0};    // keep_keys_for: 0 sets no expiry on the lock and holder keys
  bool m_own_clock = false;  // decide_on_own_clock

  // keep_keys_for's lifetime, and the counter's (at least k_fence_keep), as
  // PEXPIRE arguments: whole milliseconds, rounded up; "0" for none.
  std::string lock_keep_ms() const;
  std::string counter_keep_ms() const;

  // Runs `commands` on the node that serves `key` (the URL's node if there is
  // no key or its slot is not known yet), following MOVED and ASK redirects.
  std::vector<redis::Reply> exchange(std::vector<redis::Command> commands, std::string_view key);
  // One command, routed by its key; an error reply becomes util::Error.
  redis::Reply run(const redis::Command& command);
  redis::Connection& node(const std::string& address);
  // With ConnectOptions::for_locks, adds the INFO checks (redis/fitness.hpp)
  // to a connection's setup.
  void check_fitness(redis::Connection& connection);

  // Runs a lock write and, with --replicas, WAIT in the same round trip;
  // returns the write's reply. A write that `wrote` says the reply reports, but
  // that too few replicas confirmed, could vanish in a failover: `undo` takes
  // it back (best effort), and this throws unavailable (69).
  redis::Reply write(const redis::Command& command,
                     const std::function<bool(const redisReply&)>& wrote,
                     const std::function<void(const redisReply&)>& undo);
  // Throws the util::Error for an error reply to `command`: what our scripts
  // meet (no EVAL, CROSSSLOT, a bad counter) in words, the rest as the
  // connection layer maps it (throw_reply_error).
  [[noreturn]] void fail(const redisReply& reply, const redis::Command& command);
};

}  // namespace nxlock::store
