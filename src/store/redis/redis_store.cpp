// RedisStore's core (RedisCore): connecting, cluster routing, the command funnel and the one
// write path; and RedisStore's own setup.
#include "store/redis/redis_store.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>

#include "store/redis/cluster.hpp"
#include "store/redis/connection.hpp"
#include "store/redis/endpoint_setup.hpp"
#include "store/redis/fitness.hpp"
#include "store/redis/redis_watcher.hpp"
#include "store/redis/scripts.hpp"
#include "store/redis/sentinel.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using redis::auth_setup;
using redis::Command;
using redis::Connection;
using redis::integer_of;
using redis::Reply;
using util::Error;
using util::ErrorKind;

bool is_script(const Command& command) {
  return !command.args.empty() && command.args.front() == "EVAL";
}

// A MOVED or ASK chain longer than this is a cluster in flux: give up (69).
constexpr int k_max_redirects = 5;

std::shared_ptr<const net::Endpoint> make_endpoint(const Url& url, const ConnectOptions& options) {
  auto endpoint = std::make_shared<net::Endpoint>(redis::endpoint_of(url, options));
  if (url.scheme == Url::Scheme::redis_sentinel) {
    // Shared by the store's connection and its watchers': each asks at connect.
    endpoint->locator = std::make_shared<redis::SentinelLocator>(
        url.redacted, url.sentinels, url.master, options.sentinel_password, options.timeout_seconds,
        endpoint->tls);
  }
  return endpoint;
}

}  // namespace

RedisCore::RedisCore(const Url& url, const ConnectOptions& options)
    : m_url(url),
      m_endpoint(make_endpoint(url, options)),
      m_password(redis::password_of(url, options)),
      m_deadline(std::make_shared<std::optional<util::Micros>>()),
      m_replicas(options.replicas),
      m_timeout_seconds(options.timeout_seconds),
      m_for_locks(options.for_locks),
      m_warn(options.warn) {
  const auto setup = redis::login_setup(m_url, m_password);
  // Cluster seed nodes: the first that answers is the one we talk to first.
  for (std::size_t i = 0;; ++i) {
    m_connection = std::make_unique<Connection>(*m_endpoint, setup);
    check_fitness(*m_connection);
    try {
      m_connection->ensure_connected();
      return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::unavailable || i + 1 >= m_url.seeds.size()) {
        throw;
      }
      if (util::tracing()) {
        util::trace("redis: seed " + m_endpoint->host + ":" + std::to_string(m_endpoint->port) +
                    ": " + e.reason() + "; trying the next");
      }
      auto next = std::make_shared<net::Endpoint>(*m_endpoint);
      next->host = m_url.seeds[i + 1].host;
      next->port = m_url.seeds[i + 1].port;
      m_endpoint = std::move(next);
    }
  }
}

RedisCore::~RedisCore() = default;

void RedisCore::check_fitness(Connection& connection) {
  // Only where locks are taken: unlock and the key/value commands must still
  // work on a server that may evict (unlock above all, to free a lock).
  if (m_for_locks) {
    redis::add_fitness_checks(connection, m_url.redacted, m_warn, m_warned);
  }
}

Connection& RedisCore::node(const std::string& address) {
  auto& slot = m_nodes[address];
  if (!slot) {
    // Another node of the cluster: as the URL's, but at this address (no
    // SELECT: a cluster has only db 0).
    net::Endpoint endpoint = *m_endpoint;
    const auto colon = address.rfind(':');
    endpoint.host = address.substr(0, colon);
    endpoint.port = std::stoi(address.substr(colon + 1));
    endpoint.name = m_url.redacted + " (node " + address + ")";
    slot = std::make_unique<Connection>(std::move(endpoint), auth_setup(m_url, m_password));
    slot->set_cap(*m_deadline);
    check_fitness(*slot);  // every node that may hold a lock
  }
  return *slot;
}

std::vector<Reply> RedisCore::exchange(std::vector<Command> commands, std::string_view key) {
  Connection* connection = m_connection.get();
  if (!key.empty() && !m_slots.empty()) {
    if (const auto found = m_slots.find(redis::key_slot(key)); found != m_slots.end()) {
      connection = &node(found->second);
    }
  }
  bool asking = false;
  for (int redirects = 0;; ++redirects) {
    std::vector<Command> sent;
    if (asking) {
      sent.push_back({{"ASKING"}, {}});
    }
    sent.insert(sent.end(), commands.begin(), commands.end());
    auto replies = connection->exchange(sent);
    if (asking) {
      if (replies.front()->type == REDIS_REPLY_ERROR) {
        throw_reply_error(*replies.front(), sent.front(), connection->endpoint().name);
      }
      replies.erase(replies.begin());
    }
    const auto redirect = redis::parse_redirect(*replies.front());
    if (!redirect) {
      return replies;
    }
    if (redirects == k_max_redirects) {
      throw Error(ErrorKind::unavailable, m_url.redacted,
                  "too many cluster redirects for key '" + util::escape(key, redis::k_trace_bytes) +
                      "' (last: " + redis::describe_reply(*replies.front()) + ")");
    }
    std::string host = redirect->address.host;
    if (host.empty()) {  // "MOVED 3999 :6380": the node did not know its own address
      host = connection->endpoint().host;
    }
    const std::string address = host + ":" + std::to_string(redirect->address.port);
    if (util::tracing()) {
      util::trace("redis: " + redis::describe_reply(*replies.front()) + "; following");
    }
    // MOVED: the slot lives there now, for this command and every later one.
    // ASK: a slot being migrated; only this command goes there, after ASKING.
    asking = redirect->ask;
    if (!asking) {
      m_slots[redirect->slot] = address;
    }
    connection = address == m_connection->endpoint().host + ":" +
                                std::to_string(m_connection->endpoint().port)
                     ? m_connection.get()
                     : &node(address);
  }
}

Reply RedisCore::run(const Command& command) {
  auto replies = exchange({command}, command.key);
  if (replies.front()->type == REDIS_REPLY_ERROR) {
    fail(*replies.front(), command);
  }
  return std::move(replies.front());
}

void RedisCore::fail(const redisReply& reply, const Command& command) {
  const std::string_view text(reply.str, reply.len);
  const std::string_view code = redis::error_code(reply);
  if (!is_script(command)) {
    throw_reply_error(reply, command, m_url.redacted);
  }
  const std::string what =
      m_url.redacted + " key '" + util::escape(command.key, redis::k_trace_bytes) + "'";
  // Every lock write is a script (the fenced acquisition first of all), so a
  // server without EVAL is found out before run-locked starts a job.
  const auto needs_eval = [&](std::string_view why) {
    // The server's words without the script it quotes after "with args".
    return std::string(why) + " (" +
           util::escape(text.substr(0, text.find(", with args")), redis::k_trace_bytes) +
           "); nxlock's locks need Lua scripts: EVAL must be allowed";
  };
  if (text.starts_with("ERR unknown command")) {
    throw Error(ErrorKind::unavailable, what, needs_eval("the server does not know EVAL"));
  }
  if (code == "NOPERM" && text.find("'eval'") != std::string_view::npos) {
    throw Error(ErrorKind::permission, what, needs_eval("this user may not run EVAL"));
  }
  if (code == "CROSSSLOT" && command.args.size() > 4 && command.args[2] != "1") {
    throw Error(ErrorKind::usage, what,
                "on a Redis Cluster its fencing counter '" +
                    util::escape(command.args[4], redis::k_trace_bytes) +
                    "' cannot share its hash slot; name the lock without '}', or give it a "
                    "hash tag, as in '{tag}rest' (the Cluster hashes only the tag)");
  }
  if (text.find("not an integer") != std::string_view::npos && command.args.size() > 4 &&
      command.args[2] != "1") {
    throw Error(
        ErrorKind::data,
        m_url.redacted + " key '" + util::escape(command.args[4], redis::k_trace_bytes) + "'",
        "the fencing counter does not hold an integer below 2^63 (it is nxlock's; set "
        "it back to a number at least as high as it was)");
  }
  throw_reply_error(reply, command, m_url.redacted);
}

void RedisCore::set_deadline(std::optional<util::Micros> monotonic_deadline) {
  *m_deadline = monotonic_deadline;
  m_connection->set_cap(monotonic_deadline);
  for (auto& [address, connection] : m_nodes) {
    connection->set_cap(monotonic_deadline);
  }
}

Reply RedisCore::write(const Command& command, const std::function<bool(const redisReply&)>& wrote,
                       const std::function<void(const redisReply&)>& undo) {
  if (m_replicas <= 0) {
    return run(command);
  }
  // WAIT's own timeout stays inside the exchange's deadline (--io-timeout, and the
  // lock's expiry when set), so its answer, not our deadline, ends the wait: a
  // timed-out exchange would leave unknown whether the write took effect.
  double budget = m_timeout_seconds;
  if (*m_deadline) {
    budget = std::min(budget, static_cast<double>((**m_deadline - util::mono_now()).count()) / 1e6);
  }
  // Redis notices a blocked client's timeout on its next event-loop turn, up
  // to 1/hz (100 ms) late: half the budget, and at least 150 ms to spare.
  const double wait_seconds = std::min(budget / 2, budget - 0.15);
  const long long wait_ms = std::max(1LL, static_cast<long long>(wait_seconds * 1000));
  const std::string replicas = std::to_string(m_replicas);
  const std::string timeout = std::to_string(wait_ms);
  const Command wait{{"WAIT", replicas, timeout}, command.key};
  auto replies = exchange({command, wait}, command.key);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (replies[i]->type == REDIS_REPLY_ERROR) {
      fail(*replies[i], i == 0 ? command : wait);
    }
  }
  const long long acknowledged = integer_of(*replies[1], m_url.redacted);
  if (util::tracing()) {
    util::trace("redis: WAIT " + replicas + " " + timeout + " → " + std::to_string(acknowledged));
  }
  if (acknowledged >= m_replicas || !wrote(*replies[0])) {
    return std::move(replies[0]);
  }
  // A write that only the master has can vanish in a failover: undone, so it
  // is never taken for a lock that a replica would carry over.
  std::string undone = "undone";
  try {
    undo(*replies[0]);
  } catch (const Error& e) {
    undone = "not undone (" + e.reason() + "); it expires with its ttl";
  }
  throw Error(ErrorKind::unavailable,
              m_url.redacted + " key '" + util::escape(command.key, redis::k_trace_bytes) + "'",
              std::to_string(acknowledged) + " of " + std::to_string(m_replicas) +
                  " replicas confirmed the write within the timeout (--replicas); " + undone);
}

std::string RedisCore::lock_keep_ms(util::Micros lifetime) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(lifetime).count());
}

std::string RedisCore::counter_keep_ms(util::Micros lifetime) {
  const util::Micros keep = std::max(lifetime, Store::k_fence_keep);
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(keep).count());
}

std::unique_ptr<Watcher> RedisCore::subscribe(std::string_view key, std::string ticket) {
  // A second connection, opened only now that a waiter actually waits: a
  // subscribed connection can run no other command. Pub/sub ignores the db,
  // so it needs no SELECT. SUBSCRIBE is part of its setup, so every
  // reconnect subscribes again; reading the confirmation is what arms the
  // watch: once the server has answered, every later PUBLISH reaches us.
  // A queued waiter subscribes to its turn channel too, in the same command.
  auto setup = auth_setup(m_url, m_password);
  setup.push_back({"SUBSCRIBE", redis::wake_channel(key)});
  if (!ticket.empty()) {
    setup.back().push_back(redis::turn_channel(ticket));  // one command (see RedisWatcher::for_us)
  }
  return std::make_unique<RedisWatcher>(*m_endpoint, std::move(setup), std::move(ticket),
                                        m_deadline);
}

RedisStore::RedisStore(const Url& url, const ConnectOptions& options)
    : m_core(url, options), m_queue(m_core, *this), m_leases(m_core), m_listing(m_core) {}

RedisStore::~RedisStore() = default;

util::Micros RedisStore::now() {
  const auto reply = m_core.run({{"TIME"}, {}});
  return redis::time_of(*reply, m_core.name());
}

std::unique_ptr<Watcher> RedisStore::watch(std::string_view key) {
  return m_core.subscribe(key, {});
}

void RedisStore::wake(std::string_view key) {
  try {
    // Routed by the key, so that on a Cluster it goes to the node of its slot.
    m_core.run({{"PUBLISH", redis::wake_channel(key), "1"}, key});
  } catch (const util::Error& e) {
    // Best effort, as a DEL's wake-up: the watcher's owner looks on its timer too.
    if (util::tracing()) {
      util::trace("redis: wake-up not sent: " + e.reason());
    }
  }
}

}  // namespace nxlock::store
