// RedisStore's waiters' queue (WaitersQueue): the queued take, the waking release, leave.
#include <hiredis/hiredis.h>

#include "store/keys.hpp"
#include "store/redis/redis_store.hpp"
#include "store/redis/scripts.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using redis::integer_of;
using redis::is_pair;
using redis::k_compare_and_delete_queued_script;
using redis::k_leave_queue_script;
using redis::k_queue_keep_ms;
using redis::k_set_if_absent_queued_script;
using redis::Reply;
using redis::string_of;
using redis::throw_unexpected;
using redis::wake_channel;
using util::Error;
using util::ErrorKind;

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

}  // namespace

WaitersQueue::QueuedSet RedisStore::take_or_queue(std::string_view key, std::string_view value,
                                                  std::string_view counter, std::string_view queue,
                                                  std::string_view ticket, bool waiting,
                                                  util::Micros lease) {
  // One script: the gate, the SETNX and INCR, the queue's upkeep and the GET a
  // busy lock needs, in one round trip (see k_set_if_absent_queued_script).
  const std::string leases = store::queue_lease_key(queue);
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
  // {outcome, value}, and for a waiter behind, how many are ahead of it.
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements > 3) {
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
  if (outcome == 0 && reply->elements > 2) {
    result.ahead = integer_of(*reply->element[2], m_url.redacted);
  }
  return result;
}

bool RedisStore::release_and_wake(std::string_view key, std::string_view expected,
                                  const Fence& fence, std::string_view queue) {
  // A script: see k_compare_and_delete_queued_script.
  const std::string token = std::to_string(fence.token);
  const std::string channel = wake_channel(key);
  const std::string leases = store::queue_lease_key(queue);
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
  const std::string leases = store::queue_lease_key(queue);
  try {
    run({{"EVAL", k_leave_queue_script, "3", key, queue, leases, ticket}, key});
  } catch (const Error& e) {
    if (!migrating(e) && !queue_forbidden(e)) {
      throw;
    }
    // The entry's lease lapses instead.
  }
}

std::unique_ptr<Watcher> RedisStore::watch_turn(std::string_view key, std::string ticket) {
  return subscribe(key, std::move(ticket));
}

}  // namespace nxlock::store
