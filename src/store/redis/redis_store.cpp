// RedisStore: the Store operations as Redis commands over a Connection, and pub/sub wake-ups.
#include "store/redis/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>

#include "lock/keys.hpp"
#include "store/redis/cluster.hpp"
#include "store/redis/connection.hpp"
#include "store/redis/fitness.hpp"
#include "store/redis/sentinel.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using redis::Command;
using redis::Connection;
using redis::integer_of;
using redis::Reply;
using redis::string_of;
using redis::throw_unexpected;
using util::Error;
using util::ErrorKind;

// Waiters SUBSCRIBE here; whoever changes the key PUBLISHes. Channels are not
// scoped by db, so equal keys in two dbs only cause spurious wake-ups.
constexpr std::string_view k_wake_prefix = "nxlock:wake:";
// A queued waiter also SUBSCRIBEs to a channel of its own, named after its
// ticket, on which a release hands it its turn. Naming the ticket on the key's
// channel instead woke every waiter's process to read it and go back to sleep:
// on two cores the one it named was often the last to run.
#define NXLOCK_TURN_PREFIX "nxlock:turn:"
constexpr std::string_view k_turn_prefix = NXLOCK_TURN_PREFIX;

// Both scripts must run on the server: done as GET, compare, then DEL/SET from
// here, another client could take over an expired lock between our GET and our
// write, and we would delete or overwrite its fresh lock. A script is atomic.
// The deleting script also wakes the key's waiters: in the same round trip, so a
// released lock's next holder is not kept waiting for a separate PUBLISH. The
// wake-up is best effort (pcall): a user whose ACL forbids PUBLISH still
// releases, and the waiters then find the lock free on their poll tick.
constexpr std::string_view k_compare_and_delete_script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) "
    "redis.pcall('PUBLISH', ARGV[2], '1') return 1 else return 0 end";
// ARGV[3]: how long the key is kept at least (ms; '0': no expiry is set). SET
// drops an expiry: the key keeps the longer of the one it had and ARGV[3] (a
// counter raised by the quorum keeps its week, a holder record its lock's).
constexpr std::string_view k_compare_and_set_script =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local left = redis.call('PTTL', KEYS[1]) "
    "redis.call('SET', KEYS[1], ARGV[2]) "
    "local keep = tonumber(ARGV[3]) "
    "if keep > 0 then if left > keep then keep = left end "
    "redis.call('PEXPIRE', KEYS[1], string.format('%.0f', keep)) end "
    "return 1";

// What every fenced script starts with. Scripts that read TIME and then write
// need effects replication: the default since Redis 5, asked for on older
// servers. `now` is the server's clock in microseconds (exact in a double, below
// 2^53), `now_text` the same as decimal text (a number passed to redis.call is
// formatted as a float, which could lose digits). keep(k, ms) sets an expiry,
// relative to now, unless ms is '0'.
#define NXLOCK_TIME_PRELUDE                                                  \
  "if redis.replicate_commands then redis.replicate_commands() end "         \
  "local t = redis.call('TIME') "                                            \
  "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "                   \
  "local now_text = t[1] .. string.sub('00000' .. t[2], -6) "                \
  "local function keep(k, ms) if ms ~= '0' then redis.call('PEXPIRE', k, ms) end end "
// issue(c, ms): the next fencing token from counter c, kept ms after. A token is
// the larger of the counter plus one (INCR: exact integers) and the server's
// clock in microseconds, so tokens go on rising when the counter was evicted,
// flushed, expired or lost in a restart (as long as the clock does not step
// back). Returns the INCR's error (a counter that holds no integer) as is.
#define NXLOCK_ISSUE                                                          \
  "local function issue(c, ms) "                                              \
  "local token = redis.pcall('INCR', c) "                                     \
  "if type(token) == 'table' then return token end "                          \
  "if token < now then redis.call('SET', c, now_text) token = now end "      \
  "redis.call('PEXPIRE', c, ms) return token end "

// The fenced steps (Store's steps with a guard) are scripts for the same reason,
// and one more: the owning write and the counter's step must be one step, or a
// holder paused between them could be handed a token above its successor's, or
// the counter could move without an owner. Redis runs a script whole, with no
// other client's command in between, and replicates its effects together; on
// a cluster all keys share a hash slot (the caller names the counter so), so
// one node runs it. Only an owning step issues a token: SETNX that set the key,
// or a takeover of an absent or expired lock. A token that cannot be issued
// (the counter holds no integer) undoes the script's own write and returns the
// error, so a failed step leaves nothing behind. Every key written gets its
// expiry in the same script (keep_keys_for).
//
// KEYS: lock, counter. ARGV: value, lock keep (ms), counter keep (ms).
constexpr std::string_view k_set_if_absent_fenced_script =
    NXLOCK_TIME_PRELUDE NXLOCK_ISSUE
    "if redis.call('SETNX', KEYS[1], ARGV[1]) == 0 then return false end "
    "local token = issue(KEYS[2], ARGV[3]) "
    "if type(token) == 'table' then redis.call('DEL', KEYS[1]) return token end "
    "keep(KEYS[1], ARGV[2]) return token";
// KEYS: lock, counter. ARGV: value, now (Unix seconds; '' for the server's
// own clock), lock keep, counter keep. The page's GETSET, but compare first:
// a lock that is not expired is left untouched (GETSET would write and the
// loser give the value back, a moment in which the holder's renewal finds
// another value and calls its lock taken over). To every other client it is
// still one GETSET: atomic, returning the old value. The expiry test must be
// the lock layer's (store/lock_value.hpp): 1 to 18 decimal digits, older than
// now. tonumber() is a double, exact below 2^53; above it the value is far
// beyond any `now`.
constexpr std::string_view k_get_and_set_fenced_script =
    NXLOCK_TIME_PRELUDE NXLOCK_ISSUE
    "local limit = tonumber(t[1]) "
    "if ARGV[2] ~= '' then limit = tonumber(ARGV[2]) end "
    "local old = redis.call('GET', KEYS[1]) "
    "if old and not (#old <= 18 and string.match(old, '^%d+$') and "
    "tonumber(old) < limit) then return {old, false} end "
    "local token = issue(KEYS[2], ARGV[4]) "
    "if type(token) == 'table' then return token end "
    "redis.call('SET', KEYS[1], ARGV[1]) keep(KEYS[1], ARGV[3]) "
    "return {old, token}";
// As the unfenced ones, and the counter must still hold the holder's token: a
// lock deleted (unlock --force) and taken again with the same timestamp has a
// higher token, and is not ours. An absent counter (evicted, deleted) counts as
// ours: every acquisition writes it, so none came since it went; it is written
// back with our token. Either way it is kept a week more.
// KEYS: lock, counter. ARGV: expected, value, token, lock keep, counter keep.
constexpr std::string_view k_compare_and_set_fenced_script =
    "local function keep(k, ms) if ms ~= '0' then redis.call('PEXPIRE', k, ms) end end "
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local c = redis.call('GET', KEYS[2]) "
    "if c and c ~= ARGV[3] then return 0 end "
    "redis.call('SET', KEYS[1], ARGV[2]) keep(KEYS[1], ARGV[4]) "
    "if not c then redis.call('SET', KEYS[2], ARGV[3]) end "
    "redis.call('PEXPIRE', KEYS[2], ARGV[5]) return 1";
// KEYS: lock, counter. ARGV: expected, token, channel, counter keep. The
// delete, without its wake-up: the queued release wakes differently.
constexpr std::string_view k_fenced_delete =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local c = redis.call('GET', KEYS[2]) "
    "if c and c ~= ARGV[2] then return 0 end "
    "redis.call('DEL', KEYS[1]) "
    "if not c then redis.call('SET', KEYS[2], ARGV[2]) end "
    "redis.call('PEXPIRE', KEYS[2], ARGV[4]) ";
const std::string k_compare_and_delete_fenced_script =
    std::string(k_fenced_delete) + "redis.pcall('PUBLISH', ARGV[3], '1') return 1";

// The waiters' queue (WaitersQueue, store.hpp): two sorted sets in the lock
// key's slot, QUEUE (tickets scored by arrival, server microseconds) and
// QUEUE's lease companion (the same tickets scored by the instant their lease
// lapses). A release PUBLISHes the first live ticket on that waiter's own turn
// channel (turn()), which only it receives. The server's own TIME decides
// leases, so the waiters' clocks need not agree. `head()` drops the lapsed
// entries it meets at the front: a waiter killed while queued holds the others
// up for one lease at most.
constexpr std::string_view k_queue_prelude =
    NXLOCK_TIME_PRELUDE NXLOCK_ISSUE
    "local pruned = false "
    "local function turn(h) redis.pcall('PUBLISH', '" NXLOCK_TURN_PREFIX "' .. h, h) end "
    "local function head(q, l) "
    "while true do "
    "local first = redis.call('ZRANGE', q, 0, 0)[1] "
    "if not first then return false end "
    "local lease = redis.call('ZSCORE', l, first) "
    "if lease and tonumber(lease) >= now then return first end "
    "redis.call('ZREM', q, first) redis.call('ZREM', l, first) pruned = true "
    "end end ";
// KEYS: lock, counter, queue, lease. ARGV: value, ticket, waiting, lease (us),
// queue keep (ms), lock keep (ms), counter keep (ms). A waiter behind a live
// head tries nothing; one that may go first does the SETNX (and token) of
// k_set_if_absent_fenced_script, and leaves the queue when it sets. A waiter
// that did not set joins (ZADD NX keeps its place) and renews its lease; one
// that sets never writes the queue it leaves. If it dropped a dead head while
// the lock is free, the new head (when it is another) is woken: it may be
// waiting for a wake-up that the dead one took with it.
const std::string k_set_if_absent_queued_script =
    std::string(k_queue_prelude) +
    "local ticket = ARGV[2] "
    "local function join() if ARGV[3] == '1' then "
    "redis.call('ZADD', KEYS[3], 'NX', now, ticket) "
    "redis.call('ZADD', KEYS[4], now + tonumber(ARGV[4]), ticket) "
    "redis.call('PEXPIRE', KEYS[3], ARGV[5]) redis.call('PEXPIRE', KEYS[4], ARGV[5]) "
    "end end "
    "local h = head(KEYS[3], KEYS[4]) "
    "if h and h ~= ticket then "
    "join() "
    "local current = redis.call('GET', KEYS[1]) "
    "if pruned and not current then turn(h) end "
    "return {0, current} end "
    "if redis.call('SETNX', KEYS[1], ARGV[1]) == 0 then "
    "join() return {1, redis.call('GET', KEYS[1])} end "
    "local token = issue(KEYS[2], ARGV[7]) "
    "if type(token) == 'table' then redis.call('DEL', KEYS[1]) return token end "
    "keep(KEYS[1], ARGV[6]) "
    "if h then redis.call('ZREM', KEYS[3], ticket) redis.call('ZREM', KEYS[4], ticket) end "
    "return {2, token}";
// KEYS: lock, counter, queue, lease. ARGV: expected, token, channel, counter
// keep. As k_compare_and_delete_fenced_script, but the wake-up goes to the
// first live waiter alone; with none queued, '1' on the key's channel wakes
// every watcher (waiters of older versions, which are not queued).
const std::string k_compare_and_delete_queued_script =
    std::string(k_queue_prelude) + std::string(k_fenced_delete) +
    "local h = head(KEYS[3], KEYS[4]) "
    "if h then turn(h) else redis.pcall('PUBLISH', ARGV[3], '1') end return 1";
// KEYS: lock, queue, lease. ARGV: ticket. Leaving while the lock is
// free hands the wake-up on to the next live waiter (the leaver may have been
// the one woken).
const std::string k_leave_queue_script =
    std::string(k_queue_prelude) +
    "redis.call('ZREM', KEYS[2], ARGV[1]) redis.call('ZREM', KEYS[3], ARGV[1]) "
    "if redis.call('EXISTS', KEYS[1]) == 0 then "
    "local h = head(KEYS[2], KEYS[3]) "
    "if h then turn(h) end end "
    "return 1";
// Queue keys of waiters that all died expire this long after the last step.
constexpr std::int64_t k_queue_keep_ms = 60'000;

// TRYAGAIN: a multi-key script while the keys' slot migrates, some keys moved
// and some not (the queue's keys, which may not exist at all).
bool migrating(const Error& e) {
  return redis::error_code(e) == "TRYAGAIN";
}

// An ACL that lets the user take locks (EVAL, the string commands) but not
// keep the queue (ZADD, ZRANGE, TIME ... inside the script).
bool queue_forbidden(const Error& e) {
  return redis::error_code(e) == "NOPERM";
}

// The queue's lease set: the queue's own companion (lock/keys.hpp names them
// all, so that no other lock's key is ever one of them).
std::string lease_key(std::string_view queue) {
  return lock::companion_key(queue, "lease");
}

bool is_script(const Command& command) {
  return !command.args.empty() && command.args.front() == "EVAL";
}

// A token from a fenced script: an integer, or nil when the step did not own.
std::optional<std::int64_t> fence_of(const redisReply& reply, const std::string& name) {
  if (reply.type == REDIS_REPLY_NIL) {
    return std::nullopt;
  }
  return integer_of(reply, name);
}

// What the write path asks of a reply (RedisStore::write): does it report a write?
bool said_one(const redisReply& reply) {
  return reply.type == REDIS_REPLY_INTEGER && reply.integer == 1;
}

bool is_token(const redisReply& reply) {
  return reply.type == REDIS_REPLY_INTEGER;
}

bool is_string(const redisReply& reply) {
  return reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_NIL;
}

bool is_pair(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ARRAY && reply.elements == 2;
}

// A MOVED or ASK chain longer than this is a cluster in flux: give up (69).
constexpr int k_max_redirects = 5;

std::string wake_channel(std::string_view key) {
  std::string channel(k_wake_prefix);
  channel += key;
  return channel;
}

// The channel on which a queued waiter is handed its turn (see k_turn_prefix).
std::string turn_channel(std::string_view ticket) {
  std::string channel(k_turn_prefix);
  channel += ticket;
  return channel;
}

// AUTH [USER] PASSWORD, if there is a password.
std::vector<std::vector<std::string>> auth_setup(const Url& url,
                                                 const std::optional<std::string>& password) {
  std::vector<std::vector<std::string>> setup;
  if (password) {
    std::vector<std::string> auth{"AUTH"};
    if (url.user) {
      auth.push_back(*url.user);
    }
    auth.push_back(*password);
    setup.push_back(std::move(auth));
  }
  return setup;
}

// Waits on a subscriber connection: any message on the key's channel means
// "look again". A broken subscriber connection is not an error for a waiter:
// it reports `changed` (a release may have gone unseen), and the next wait
// resubscribes; while that fails, it waits out its timeout as a poll tick.
class RedisWatcher final : public Watcher {
 public:
  // `setup` is the connection's (AUTH, SUBSCRIBE to the key's channel, and
  // to the ticket's turn channel when `ticket` is not empty).
  RedisWatcher(const redis::Endpoint& endpoint, std::vector<std::vector<std::string>> setup,
               std::string ticket, std::shared_ptr<std::optional<util::Micros>> deadline)
      : m_connection(connect(endpoint, std::move(setup), *deadline)),
        m_deadline(std::move(deadline)),
        m_ticket(std::move(ticket)) {}

  WaitResult wait(util::Micros timeout, int interrupt_fd) override {
    const util::Micros deadline = util::mono_now() + std::max(timeout, util::Micros(0));
    if (!m_connection->connected()) {
      if (resubscribe(deadline)) {
        return WaitResult::changed;  // a release while we were away went unseen
      }
    } else if (m_connection->buffered() && take()) {
      return WaitResult::changed;
    }
    for (;;) {
      const int fd = m_connection->fd();
      pollfd fds[2] = {{fd, POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
      // With no connection, only the interrupt: the timeout is the poll tick.
      pollfd* first = fd >= 0 ? fds : fds + 1;
      const nfds_t count = static_cast<nfds_t>((fd >= 0 ? 1 : 0) + (interrupt_fd >= 0 ? 1 : 0));
      if (util::poll_until(first, count, deadline) == 0) {
        return WaitResult::timed_out;
      }
      if (interrupt_fd >= 0 && fds[1].revents != 0) {
        return WaitResult::interrupted;  // left unread: it is the caller's
      }
      if (fd >= 0 && fds[0].revents != 0 && take()) {
        return WaitResult::changed;
      }
      // A TLS record that held no message (a session ticket): wait on.
      if (!m_connection->connected()) {
        return WaitResult::changed;
      }
    }
  }

 private:
  static std::unique_ptr<Connection> connect(const redis::Endpoint& endpoint,
                                             std::vector<std::vector<std::string>> setup,
                                             const std::optional<util::Micros>& deadline) {
    auto connection = std::make_unique<Connection>(endpoint, std::move(setup));
    connection->set_cap(deadline);
    try {
      connection->ensure_connected();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::unavailable) {
        throw;  // a password or certificate problem does not heal by waiting
      }
      // The server is away (a restart): the first wait() subscribes again, and
      // reports `changed` when it does, so nothing published meanwhile is missed.
      if (util::tracing()) {
        util::trace("redis: (subscriber) cannot subscribe yet: " + e.reason());
      }
    }
    return connection;
  }

  // True if a message came, or the connection broke (the caller looks again).
  bool take() {
    try {
      if (m_ticket.empty()) {
        return m_connection->take_messages();
      }
      return m_connection->take_messages([&](const redisReply& reply) { return for_us(reply); });
    } catch (const Error& e) {
      if (util::tracing()) {
        util::trace("redis: (subscriber) " + e.reason() + "; will resubscribe");
      }
      m_connection->close();
      return true;
    }
  }

  bool resubscribe(util::Micros deadline) {
    // Bounded by the wait too: a waiter must stay responsive to its interrupt.
    std::optional<util::Micros> cap = *m_deadline;
    cap = cap ? std::min(*cap, deadline) : deadline;
    m_connection->set_cap(cap);
    try {
      m_connection->ensure_connected();
      return true;
    } catch (const Error& e) {
      if (util::tracing()) {
        util::trace("redis: (subscriber) cannot resubscribe: " + e.reason());
      }
      return false;
    }
  }

  // A wake-up that names another queued waiter's ticket is not ours; '1' (a
  // DEL, a release with nobody queued, an older client) is everybody's, and so
  // is anything that is not a message (a subscription confirmed again), but
  // the confirmation of our turn channel: the setup's one SUBSCRIBE for two
  // channels reads the first confirmation, which arms both (the server
  // subscribes to every channel of the command before it answers), and leaves
  // the second one to us.
  bool for_us(const redisReply& reply) const {
    if (!m_ticket.empty() && reply.type == REDIS_REPLY_ARRAY && reply.elements == 3 &&
        reply.element[0]->type == REDIS_REPLY_STRING &&
        std::string_view(reply.element[0]->str, reply.element[0]->len) == "subscribe" &&
        reply.element[1]->type == REDIS_REPLY_STRING &&
        std::string_view(reply.element[1]->str, reply.element[1]->len) == turn_channel(m_ticket)) {
      return false;
    }
    if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 3 ||
        reply.element[0]->type != REDIS_REPLY_STRING ||
        std::string_view(reply.element[0]->str, reply.element[0]->len) != "message" ||
        reply.element[2]->type != REDIS_REPLY_STRING) {
      return true;
    }
    const std::string_view payload(reply.element[2]->str, reply.element[2]->len);
    return payload == "1" || payload == m_ticket;
  }

  std::unique_ptr<Connection> m_connection;
  std::shared_ptr<std::optional<util::Micros>> m_deadline;  // the store's (set_deadline)
  std::string m_ticket;  // empty: every message wakes us; else also subscribed to its turn channel
};

std::shared_ptr<const redis::Endpoint> make_endpoint(const Url& url,
                                                     const ConnectOptions& options) {
  auto endpoint = std::make_shared<redis::Endpoint>();
  endpoint->name = url.redacted;
  endpoint->timeout_seconds = options.timeout_seconds;
  if (url.tls) {
    endpoint->tls = redis::make_tls_context(options.tls, url.redacted);
  }
  if (url.scheme == Url::Scheme::redis_unix) {
    endpoint->unix_path = url.path;
  } else if (url.scheme == Url::Scheme::redis_sentinel) {
    // Shared by the store's connection and its watchers': each asks at connect.
    endpoint->locator = std::make_shared<redis::SentinelLocator>(
        url.redacted, url.sentinels, url.master, options.sentinel_password, options.timeout_seconds,
        endpoint->tls);
  } else {
    endpoint->host = url.host;
    endpoint->port = url.port;
  }
  return endpoint;
}

}  // namespace

RedisStore::RedisStore(const Url& url, const ConnectOptions& options)
    : m_url(url),
      m_endpoint(make_endpoint(url, options)),
      m_password(options.password ? options.password : url.password),
      m_deadline(std::make_shared<std::optional<util::Micros>>()),
      m_replicas(options.replicas),
      m_timeout_seconds(options.timeout_seconds),
      m_for_locks(options.for_locks),
      m_warn(options.warn) {
  auto setup = auth_setup(m_url, m_password);
  if (url.db != 0) {
    setup.push_back({"SELECT", std::to_string(url.db)});
  }
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
      auto next = std::make_shared<redis::Endpoint>(*m_endpoint);
      next->host = m_url.seeds[i + 1].host;
      next->port = m_url.seeds[i + 1].port;
      m_endpoint = std::move(next);
    }
  }
}

RedisStore::~RedisStore() = default;

void RedisStore::check_fitness(Connection& connection) {
  // Only where locks are taken: unlock and the key/value commands must still
  // work on a server that may evict (unlock above all, to free a lock).
  if (m_for_locks) {
    redis::add_fitness_checks(connection, m_url.redacted, m_warn, m_warned);
  }
}

Connection& RedisStore::node(const std::string& address) {
  auto& slot = m_nodes[address];
  if (!slot) {
    // Another node of the cluster: as the URL's, but at this address (no
    // SELECT: a cluster has only db 0).
    redis::Endpoint endpoint = *m_endpoint;
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

std::vector<Reply> RedisStore::exchange(std::vector<Command> commands, std::string_view key) {
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

Reply RedisStore::run(const Command& command) {
  auto replies = exchange({command}, command.key);
  if (replies.front()->type == REDIS_REPLY_ERROR) {
    fail(*replies.front(), command);
  }
  return std::move(replies.front());
}

void RedisStore::fail(const redisReply& reply, const Command& command) {
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

void RedisStore::set_deadline(std::optional<util::Micros> monotonic_deadline) {
  *m_deadline = monotonic_deadline;
  m_connection->set_cap(monotonic_deadline);
  for (auto& [address, connection] : m_nodes) {
    connection->set_cap(monotonic_deadline);
  }
}

Reply RedisStore::write(const Command& command, const std::function<bool(const redisReply&)>& wrote,
                        const std::function<void(const redisReply&)>& undo) {
  if (m_replicas <= 0) {
    return run(command);
  }
  // WAIT's own timeout stays inside the exchange's deadline (--timeout, and the
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

SetIfAbsent RedisStore::set_if_absent(std::string_view key, std::string_view value,
                                      std::optional<std::string_view> counter) {
  // An unconfirmed set is deleted again. The counter keeps its step: tokens
  // need only grow, never be dense.
  const auto undo = [&](const redisReply&) { compare_and_delete(key, value); };
  if (!counter) {
    const auto reply = write({{"SETNX", key, value}, key}, said_one, undo);
    return {integer_of(*reply, m_url.redacted) == 1, std::nullopt};
  }
  // A script, not SETNX then INCR: see k_set_if_absent_fenced_script.
  const std::string keep = lock_keep_ms();
  const std::string counter_keep = counter_keep_ms();
  const auto reply = write(
      {{"EVAL", k_set_if_absent_fenced_script, "2", key, *counter, value, keep, counter_keep}, key},
      is_token, undo);
  const auto fence = fence_of(*reply, m_url.redacted);
  return {fence.has_value(), fence};
}

std::optional<std::string> RedisStore::get(std::string_view key) {
  const auto reply = run({{"GET", key}, key});
  return string_of(*reply, m_url.redacted);
}

Swap RedisStore::get_and_set(std::string_view key, std::string_view value,
                             std::optional<Takeover> takeover) {
  // An unconfirmed swap gives the old value back (or deletes ours).
  const auto give_back = [&](const std::optional<std::string>& old) {
    if (old) {
      compare_and_set(key, value, *old);
    } else {
      compare_and_delete(key, value);
    }
  };
  if (!takeover) {
    // GETSET rather than SET ... GET: the documented pattern names GETSET, and
    // it works on servers older than 6.2.
    const auto reply = write({{"GETSET", key, value}, key}, is_string,
                             [&](const redisReply& r) { give_back(string_of(r, m_url.redacted)); });
    return {string_of(*reply, m_url.redacted), std::nullopt};
  }
  // A script, not GETSET then INCR: see k_get_and_set_fenced_script. On the
  // server's own clock the script decides with TIME at the instant of the
  // step: never on an estimate carried from an earlier reply, which a slow
  // exchange can leave running ahead of the server.
  const std::string now = m_own_clock ? std::string() : std::to_string(takeover->now_seconds);
  const std::string keep = lock_keep_ms();
  const std::string counter_keep = counter_keep_ms();
  const auto reply = write(
      {{"EVAL", k_get_and_set_fenced_script, "2", key, takeover->counter, value, now, keep,
        counter_keep},
       key},
      [](const redisReply& r) { return is_pair(r) && is_token(*r.element[1]); },
      [&](const redisReply& r) { give_back(string_of(*r.element[0], m_url.redacted)); });
  if (!is_pair(*reply)) {
    throw_unexpected(*reply, m_url.redacted);
  }
  Swap swap{string_of(*reply->element[0], m_url.redacted),
            fence_of(*reply->element[1], m_url.redacted)};
  swap.written = swap.fence.has_value();  // the script compares first
  return swap;
}

void RedisStore::set(std::string_view key, std::string_view value) {
  // A lock's holder details expire with it (keep_keys_for); SET PX is one step.
  if (m_keep > util::Micros(0)) {
    const std::string ms = lock_keep_ms();
    run({{"SET", key, value, "PX", ms}, key});
    return;
  }
  run({{"SET", key, value}, key});
}

std::size_t RedisStore::del(const std::vector<std::string>& keys) {
  if (keys.empty()) {
    return 0;  // DEL with no keys is a syntax error, and the answer is known
  }
  // Each key's waiters are woken in the same round trip, after the DEL.
  std::vector<std::string> channels;
  for (const auto& key : keys) {
    channels.push_back(wake_channel(key));
  }
  Command command{{"DEL"}, keys.size() == 1 ? std::string_view(keys.front()) : std::string_view()};
  for (const auto& key : keys) {
    command.args.push_back(key);
  }
  const auto delete_and_wake = [&](const Command& del, std::size_t first, std::size_t count) {
    std::vector<Command> commands{del};
    for (std::size_t i = first; i < first + count; ++i) {
      commands.push_back({{"PUBLISH", channels[i], "1"}, {}});
    }
    auto replies = exchange(std::move(commands), del.key);
    for (std::size_t i = 1; i < replies.size(); ++i) {
      // Best effort (an ACL may forbid PUBLISH): the keys are deleted all the
      // same, and their waiters find that on their poll tick.
      if (replies[i]->type == REDIS_REPLY_ERROR && util::tracing()) {
        util::trace("redis: wake-up not sent: " + redis::describe_reply(*replies[i]));
      }
    }
    return std::move(replies.front());
  };
  const Reply reply = delete_and_wake(command, 0, keys.size());
  if (redis::error_code(*reply) == "CROSSSLOT") {
    // A cluster, and keys in several slots: one DEL each, on its own node.
    std::size_t removed = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Command one{{"DEL", keys[i]}, keys[i]};
      const Reply each = delete_and_wake(one, i, 1);
      if (each->type == REDIS_REPLY_ERROR) {
        throw_reply_error(*each, one, m_url.redacted);
      }
      removed += static_cast<std::size_t>(integer_of(*each, m_url.redacted));
    }
    return removed;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    throw_reply_error(*reply, command, m_url.redacted);
  }
  return static_cast<std::size_t>(integer_of(*reply, m_url.redacted));
}

bool RedisStore::compare_and_delete(std::string_view key, std::string_view expected,
                                    std::optional<Fence> fence) {
  const std::string channel = wake_channel(key);
  if (!fence) {
    // A script, not GET then DEL: see k_compare_and_delete_script.
    const auto reply =
        run({{"EVAL", k_compare_and_delete_script, "1", key, expected, channel}, key});
    return integer_of(*reply, m_url.redacted) == 1;
  }
  // A script: see k_compare_and_delete_fenced_script.
  const std::string token = std::to_string(fence->token);
  const std::string counter_keep = counter_keep_ms();
  const auto reply = run({{"EVAL", k_compare_and_delete_fenced_script, "2", key, fence->counter,
                           expected, token, channel, counter_keep},
                          key});
  return integer_of(*reply, m_url.redacted) == 1;
}

bool RedisStore::compare_and_set(std::string_view key, std::string_view expected,
                                 std::string_view value, std::optional<Fence> fence) {
  const std::string keep = lock_keep_ms();
  // An unconfirmed swap goes back to `expected`: the caller (a renewal)
  // retries from the value it knows.
  if (!fence) {
    // A script, not GET then SET: see k_compare_and_set_script.
    const auto swap = [&](std::string_view from, std::string_view to) {
      return Command{{"EVAL", k_compare_and_set_script, "1", key, from, to, keep}, key};
    };
    const auto reply = write(swap(expected, value), said_one,
                             [&](const redisReply&) { run(swap(value, expected)); });
    return integer_of(*reply, m_url.redacted) == 1;
  }
  // A script: see k_compare_and_set_fenced_script.
  const std::string token = std::to_string(fence->token);
  const std::string counter_keep = counter_keep_ms();
  const auto swap = [&](std::string_view from, std::string_view to) {
    return Command{{"EVAL", k_compare_and_set_fenced_script, "2", key, fence->counter, from, to,
                    token, keep, counter_keep},
                   key};
  };
  const auto reply = write(swap(expected, value), said_one,
                           [&](const redisReply&) { run(swap(value, expected)); });
  return integer_of(*reply, m_url.redacted) == 1;
}

WaitersQueue::QueuedSet RedisStore::set_if_absent(std::string_view key, std::string_view value,
                                                  std::string_view counter, std::string_view queue,
                                                  std::string_view ticket, bool waiting,
                                                  util::Micros lease) {
  // One script: the gate, the SETNX and INCR, the queue's upkeep and the GET a
  // busy lock needs, in one round trip (see k_set_if_absent_queued_script).
  const std::string leases = lease_key(queue);
  const std::string lease_us = std::to_string(lease.count());
  const std::string keep = std::to_string(k_queue_keep_ms);
  const std::string lock_keep = lock_keep_ms();
  const std::string counter_keep = counter_keep_ms();
  Reply reply;
  try {
    if (m_queue_forbidden) {
      throw redis::ServerError(ErrorKind::permission, m_url.redacted, "NOPERM (the queue, before)",
                               "NOPERM");
    }
    // An unconfirmed set is deleted again (and the ticket has left the queue).
    reply = write(
        {{"EVAL", k_set_if_absent_queued_script, "4", key, counter, queue, leases, value, ticket,
          waiting ? "1" : "0", lease_us, keep, lock_keep, counter_keep},
         key},
        [](const redisReply& r) {
          return is_pair(r) && r.element[0]->type == REDIS_REPLY_INTEGER &&
                 r.element[0]->integer == 2;
        },
        [&](const redisReply&) { compare_and_delete(key, value); });
  } catch (const Error& e) {
    if (queue_forbidden(e)) {
      if (!m_queue_forbidden && util::tracing()) {
        util::trace("redis: the waiters' queue is not allowed (" + e.reason() +
                    "); waiting without it");
      }
      m_queue_forbidden = true;
    } else if (!migrating(e)) {
      throw;
    }
    // The lock's slot is moving to another node, and the queue's keys are not
    // all there yet, or the user may not keep a queue: the unqueued steps
    // (an entry of ours lapses with its lease).
    return unqueued(*this, key, value, counter);
  }
  if (!is_pair(*reply)) {
    throw_unexpected(*reply, m_url.redacted);
  }
  QueuedSet result;
  const auto outcome = integer_of(*reply->element[0], m_url.redacted);
  if (outcome == 2) {
    result.outcome = QueuedSet::Outcome::set;
    result.fence = integer_of(*reply->element[1], m_url.redacted);
    return result;
  }
  result.outcome = outcome == 1 ? QueuedSet::Outcome::held : QueuedSet::Outcome::behind;
  result.current = string_of(*reply->element[1], m_url.redacted);
  return result;
}

bool RedisStore::compare_and_delete(std::string_view key, std::string_view expected,
                                    const Fence& fence, std::string_view queue) {
  // A script: see k_compare_and_delete_queued_script.
  const std::string token = std::to_string(fence.token);
  const std::string channel = wake_channel(key);
  const std::string leases = lease_key(queue);
  try {
    const std::string counter_keep = counter_keep_ms();
    const auto reply = run({{"EVAL", k_compare_and_delete_queued_script, "4", key, fence.counter,
                             queue, leases, expected, token, channel, counter_keep},
                            key});
    return integer_of(*reply, m_url.redacted) == 1;
  } catch (const Error& e) {
    if (!migrating(e) && !queue_forbidden(e)) {
      throw;
    }
    return compare_and_delete(key, expected, std::optional(fence));  // wakes every waiter
  }
}

void RedisStore::leave(std::string_view key, std::string_view queue, std::string_view ticket) {
  const std::string leases = lease_key(queue);
  try {
    run({{"EVAL", k_leave_queue_script, "3", key, queue, leases, ticket}, key});
  } catch (const Error& e) {
    if (!migrating(e) && !queue_forbidden(e)) {
      throw;
    }
    // The entry's lease lapses instead.
  }
}

std::string RedisStore::lock_keep_ms() const {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(m_keep).count());
}

std::string RedisStore::counter_keep_ms() const {
  const util::Micros keep = std::max(m_keep, k_fence_keep);
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(keep).count());
}

util::Micros RedisStore::now() {
  const auto reply = run({{"TIME"}, {}});
  return redis::time_of(*reply, m_url.redacted);
}

std::unique_ptr<Watcher> RedisStore::watch(std::string_view key) {
  return subscribe(key, {});
}

std::unique_ptr<Watcher> RedisStore::watch(std::string_view key, std::string ticket) {
  return subscribe(key, std::move(ticket));
}

std::unique_ptr<Watcher> RedisStore::subscribe(std::string_view key, std::string ticket) {
  // A second connection, opened only now that a waiter actually waits: a
  // subscribed connection can run no other command. Pub/sub ignores the db,
  // so it needs no SELECT. SUBSCRIBE is part of its setup, so every
  // reconnect subscribes again; reading the confirmation is what arms the
  // watch: once the server has answered, every later PUBLISH reaches us.
  // A queued waiter subscribes to its turn channel too, in the same command.
  auto setup = auth_setup(m_url, m_password);
  setup.push_back({"SUBSCRIBE", wake_channel(key)});
  if (!ticket.empty()) {
    setup.back().push_back(turn_channel(ticket));  // one command (see RedisWatcher::for_us)
  }
  return std::make_unique<RedisWatcher>(*m_endpoint, std::move(setup), std::move(ticket),
                                        m_deadline);
}

}  // namespace nxlock::store
