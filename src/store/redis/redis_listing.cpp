// RedisListing, a Redis server's listing (LockListing): SCAN, never KEYS, on the server or each
// master of a cluster; each batch's values, holder records, counters, queues and shared leases read
// in one pipeline.
#include <hiredis/hiredis.h>

#include <set>
#include <string>
#include <vector>

#include "store/keys.hpp"
#include "store/lock_value.hpp"
#include "store/redis/redis_listing.hpp"
#include "store/redis/scripts.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using redis::Command;
using redis::Connection;
using redis::Reply;

// Keys a SCAN step looks at: large enough that 10,000 locks take a few round
// trips, small enough that the server is never busy for long with one step.
constexpr std::string_view k_scan_count = "1000";

// What is read for each key of a batch, in this order.
constexpr std::size_t k_reads_per_key = 7;

std::string address_of(const net::Endpoint& endpoint) {
  return endpoint.host + ":" + std::to_string(endpoint.port);
}

std::optional<std::string> string_reply(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_STRING) {
    return std::nullopt;  // nil; or another type, or an error (WRONGTYPE, MOVED mid-migration)
  }
  return std::string(reply.str, reply.len);
}

// The live leases (ZRANGEBYSCORE ... WITHSCORES) with their holders' details (HGETALL).
std::vector<SharedHolder> shared_holders(const redisReply& leases, const redisReply& details) {
  std::vector<SharedHolder> found;
  if (leases.type != REDIS_REPLY_ARRAY) {
    return found;
  }
  for (std::size_t i = 0; i + 1 < leases.elements; i += 2) {
    const auto id = string_reply(*leases.element[i]);
    const auto score = string_reply(*leases.element[i + 1]);
    // A score is a lock value, which Redis replies as a whole number.
    const auto expiry = score ? parse_lock_timestamp(*score) : std::nullopt;
    if (!id || !expiry) {
      continue;
    }
    SharedHolder& holder = found.emplace_back();
    holder.id = *id;
    holder.expiry = *expiry;
    for (std::size_t j = 0; details.type == REDIS_REPLY_ARRAY && j + 1 < details.elements; j += 2) {
      if (string_reply(*details.element[j]) == *id) {
        holder.details = string_reply(*details.element[j + 1]);
      }
    }
  }
  return found;
}

// The queue's tickets (ZRANGE, arrival order) whose lease is live (ZRANGEBYSCORE
// of the leases from now): the waiters list --waiters shows, in the order they came.
std::vector<std::string> live_in_arrival_order(const redisReply& live, const redisReply& queue) {
  std::set<std::string> alive;
  for (std::size_t i = 0; live.type == REDIS_REPLY_ARRAY && i < live.elements; ++i) {
    if (auto ticket = string_reply(*live.element[i])) {
      alive.insert(std::move(*ticket));
    }
  }
  std::vector<std::string> tickets;
  for (std::size_t i = 0; queue.type == REDIS_REPLY_ARRAY && i < queue.elements; ++i) {
    auto ticket = string_reply(*queue.element[i]);
    if (ticket && alive.contains(*ticket)) {
      tickets.push_back(std::move(*ticket));
    }
  }
  return tickets;
}


// Whether `lock`'s live leases hold its key (k_shared_prelude's held()): its
// value is their latest expiry, and the counter (`counter`, GET) still holds
// the token the set recorded (field '@fence' of `details`, HGETALL). No leases: true.
bool shared_hold(const ListedLock& lock, const redisReply& counter, const redisReply& details) {
  if (lock.shared.empty()) {
    return true;
  }
  std::int64_t latest = 0;
  for (const auto& lease : lock.shared) {
    latest = std::max(latest, lease.expiry);
  }
  if (lock.value != std::to_string(latest)) {
    return false;
  }
  const auto token = string_reply(counter);
  for (std::size_t j = 0; details.type == REDIS_REPLY_ARRAY && j + 1 < details.elements; j += 2) {
    if (string_reply(*details.element[j]) == "@fence") {
      return !token || string_reply(*details.element[j + 1]) == token;
    }
  }
  return true;
}

// The reads of a batch are pipelined, not one step: a lease renewed between a
// lock's GET and its leases' read moves both. Each lock whose leases seemed to
// have lost its key is read again in one atomic step, and keeps its leases
// only if they hold it.
void reread_leases(redis::Connection& connection, const std::string& name,
                   std::vector<ListedLock>& batch, const std::vector<std::size_t>& stale) {
  if (stale.empty()) {
    return;
  }
  std::vector<std::string> names;
  names.reserve(3 * stale.size());
  std::vector<Command> reads;
  for (const std::size_t i : stale) {
    const std::string& key = batch[i].key;
    const auto& counter = names.emplace_back(store::fence_key(key));
    const auto& leases = names.emplace_back(store::shared_key(key));
    const auto& details = names.emplace_back(store::details_key(leases));
    reads.push_back({{"EVAL", redis::k_read_leases_script, "4", key, counter, leases, details}, key});
  }
  const auto replies = connection.exchange(reads);
  for (std::size_t n = 0; n < stale.size(); ++n) {
    ListedLock& lock = batch[stale[n]];
    LeaseSet set = redis::lease_set_of(*replies[n], name);
    if (set.holding && set.lock_value) {
      lock.value = std::move(*set.lock_value);
      lock.shared = std::move(set.leases);
    } else {
      lock.shared.clear();  // lost to whoever wrote the key since
    }
  }
}

}  // namespace

void RedisListing::list(std::string_view pattern, const Wanted& wanted, const Visit& visit) {
  for (Connection* connection : m_core.masters()) {
    scan(*connection, pattern, wanted, visit);
  }
}

std::vector<Connection*> RedisCore::masters() {
  // A cluster names its masters in CLUSTER SLOTS; any other server (a
  // Sentinel's master too) refuses it, and is the one to scan. A user the ACL
  // refuses CLUSTER is scanned on its one server.
  const Command slots{{"CLUSTER", "SLOTS"}, {}};
  const auto replies = m_connection->exchange({slots});
  const redisReply& reply = *replies.front();
  if (reply.type != REDIS_REPLY_ARRAY) {
    if (util::tracing()) {
      util::trace("redis: " + redis::describe_reply(reply) + "; scanning this server alone");
    }
    return {m_connection.get()};
  }
  const std::string own = address_of(m_connection->endpoint());
  std::set<std::string> addresses;
  for (std::size_t i = 0; i < reply.elements; ++i) {
    // [start, end, [host, port, id, ...] of the master, replicas...]
    const redisReply& range = *reply.element[i];
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3) {
      redis::throw_unexpected(reply, m_url.redacted);
    }
    const redisReply& master = *range.element[2];
    if (master.type != REDIS_REPLY_ARRAY || master.elements < 2 ||
        master.element[0]->type != REDIS_REPLY_STRING ||
        master.element[1]->type != REDIS_REPLY_INTEGER) {
      redis::throw_unexpected(reply, m_url.redacted);
    }
    std::string host(master.element[0]->str, master.element[0]->len);
    if (host.empty()) {  // a node that does not know its own address: the one we asked
      host = m_connection->endpoint().host;
    }
    addresses.insert(host + ":" + std::to_string(master.element[1]->integer));
  }
  std::vector<Connection*> connections;
  for (const auto& address : addresses) {
    connections.push_back(address == own ? m_connection.get() : &node(address));
  }
  return connections;
}

void RedisListing::scan(Connection& connection, std::string_view pattern, const Wanted& wanted,
                        const Visit& visit) {
  const std::string& name = connection.endpoint().name;
  std::string cursor = "0";
  do {
    // TIME rides with SCAN: the queues' leases are on the server's clock.
    const Command scan{{"SCAN", cursor, "MATCH", pattern, "COUNT", k_scan_count}, {}};
    const auto replies = connection.exchange({scan, {{"TIME"}, {}}});
    const redisReply& found = *replies[0];
    if (found.type == REDIS_REPLY_ERROR) {
      redis::throw_reply_error(found, scan, name);
    }
    if (found.type != REDIS_REPLY_ARRAY || found.elements != 2 ||
        found.element[1]->type != REDIS_REPLY_ARRAY) {
      redis::throw_unexpected(found, name);
    }
    cursor = redis::string_of(*found.element[0], name).value_or("0");
    const util::Micros time = redis::time_of(*replies[1], name);
    const std::string now = std::to_string(time.count());
    const std::string now_seconds = std::to_string(util::whole_seconds(time));

    std::vector<std::string> keys;
    for (std::size_t i = 0; i < found.element[1]->elements; ++i) {
      const redisReply& key = *found.element[1]->element[i];
      if (key.type == REDIS_REPLY_STRING && wanted(std::string_view(key.str, key.len))) {
        keys.emplace_back(key.str, key.len);
      }
    }
    if (keys.empty()) {
      continue;
    }
    // The names beside each key, kept alive for the commands that point at them.
    std::vector<std::string> beside;
    beside.reserve(6 * keys.size());
    std::vector<Command> reads;
    reads.reserve(k_reads_per_key * keys.size());
    for (const auto& key : keys) {
      const auto& holder = beside.emplace_back(store::holder_key(key));
      const auto& fence = beside.emplace_back(store::fence_key(key));
      const auto& queue = beside.emplace_back(store::waiters_queue_of(key));
      const auto& leases = beside.emplace_back(store::queue_lease_key(queue));
      const auto& shared = beside.emplace_back(store::shared_key(key));
      const auto& details = beside.emplace_back(store::details_key(shared));
      reads.push_back({{"GET", key}, key});
      reads.push_back({{"GET", holder}, key});
      reads.push_back({{"GET", fence}, key});
      // A waiter is live while its lease has not lapsed (k_queue_prelude's head());
      // the queue has them in arrival order.
      reads.push_back({{"ZRANGEBYSCORE", leases, now, "+inf"}, key});
      reads.push_back({{"ZRANGE", queue, "0", "-1"}, key});
      // A shared lease is live through the second its score names (k_shared_prelude's
      // prune()); its holder's details are beside it.
      reads.push_back({{"ZRANGEBYSCORE", shared, now_seconds, "+inf", "WITHSCORES"}, key});
      reads.push_back({{"HGETALL", details}, key});
    }
    const auto values = connection.exchange(reads);
    std::vector<ListedLock> batch;
    std::vector<std::size_t> stale;  // locks whose leases seem to have lost the key
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Reply* read = &values[k_reads_per_key * i];
      auto value = string_reply(*read[0]);
      if (!value || !parse_lock_timestamp(*value)) {
        continue;  // gone meanwhile, or no lock
      }
      ListedLock& lock = batch.emplace_back();
      lock.key = keys[i];
      lock.value = std::move(*value);
      lock.waiters = 0;
      lock.holder = string_reply(*read[1]);
      if (const auto counter = string_reply(*read[2])) {
        lock.fence = parse_fence(*counter);
      }
      lock.queued = live_in_arrival_order(*read[3], *read[4]);
      lock.waiters = static_cast<std::int64_t>(lock.queued.size());
      lock.shared = shared_holders(*read[5], *read[6]);
      if (!shared_hold(lock, *read[2], *read[6])) {
        stale.push_back(batch.size() - 1);
      }
    }
    reread_leases(connection, name, batch, stale);
    visit(std::move(batch));
  } while (cursor != "0");
}

}  // namespace nxlock::store
