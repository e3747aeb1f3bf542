// RedisQueue, a Redis server's waiters' queue (WaitersQueue): the queued take, the waking
// release, leave.
#include <hiredis/hiredis.h>

#include "store/keys.hpp"
#include "store/redis/redis_queue.hpp"
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

WaitersQueue::QueuedSet RedisQueue::take_or_queue(std::string_view key, std::string_view value,
                                                  std::string_view counter, std::string_view queue,
                                                  std::string_view ticket, bool waiting,
                                                  util::Micros lease, StepPolicy policy) {
  // One script: the gate, the SETNX and INCR, the queue's upkeep and the GET a
  // busy lock needs, in one round trip (see k_set_if_absent_queued_script).
  const std::string leases = store::queue_lease_key(queue);
  const std::string lease_us = std::to_string(lease.count());
  const std::string keep = std::to_string(k_queue_keep_ms);
  const std::string lock_keep = RedisCore::lock_keep_ms(policy.lifetime);
  const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
  Reply reply;
  try {
    if (m_forbidden) {
      throw redis::ServerError(ErrorKind::permission, m_core.name(), "NOPERM (the queue, before)",
                               "NOPERM");
    }
    // An unconfirmed set is deleted again (and the ticket has left the queue).
    reply = m_core.write(
        {{"EVAL", k_set_if_absent_queued_script, "4", key, counter, queue, leases, value, ticket,
          waiting ? "1" : "0", lease_us, keep, lock_keep, counter_keep},
         key},
        [](const redisReply& r) {
          return is_pair(r) && r.element[0]->type == REDIS_REPLY_INTEGER &&
                 r.element[0]->integer == 2;
        },
        [&](const redisReply&) { m_steps.compare_and_delete(key, value, std::nullopt, policy); });
  } catch (const Error& e) {
    if (queue_forbidden(e)) {
      if (!m_forbidden && util::tracing()) {
        util::trace("redis: the waiters' queue is not allowed (" + e.reason() +
                    "); waiting without it");
      }
      m_forbidden = true;
    } else if (!migrating(e)) {
      throw;
    }
    // The lock's slot is moving to another node, and the queue's keys are not
    // all there yet, or the user may not keep a queue: the unqueued steps
    // (an entry of ours lapses with its lease).
    return unqueued(m_steps, key, value, counter, policy);
  }
  // {outcome, value}, and for a waiter behind, how many are ahead of it.
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements > 3) {
    throw_unexpected(*reply, m_core.name());
  }
  QueuedSet result;
  const auto outcome = integer_of(*reply->element[0], m_core.name());
  if (outcome == 2) {
    result.outcome = QueuedSet::Outcome::set;
    result.fence = integer_of(*reply->element[1], m_core.name());
    return result;
  }
  result.outcome = outcome == 1 ? QueuedSet::Outcome::held : QueuedSet::Outcome::behind;
  result.current = string_of(*reply->element[1], m_core.name());
  if (outcome == 0 && reply->elements > 2) {
    result.ahead = integer_of(*reply->element[2], m_core.name());
  }
  return result;
}

bool RedisQueue::release_and_wake(std::string_view key, std::string_view expected,
                                  const Fence& fence, std::string_view queue, StepPolicy policy) {
  // A script: see k_compare_and_delete_queued_script.
  const std::string token = std::to_string(fence.token);
  const std::string channel = wake_channel(key);
  const std::string leases = store::queue_lease_key(queue);
  try {
    const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
    const auto reply =
        m_core.run({{"EVAL", k_compare_and_delete_queued_script, "4", key, fence.counter, queue,
                     leases, expected, token, channel, counter_keep},
                    key});
    return integer_of(*reply, m_core.name()) == 1;
  } catch (const Error& e) {
    if (!migrating(e) && !queue_forbidden(e)) {
      throw;
    }
    return m_steps.compare_and_delete(key, expected, std::optional(fence),
                                      policy);  // wakes every waiter
  }
}

void RedisQueue::leave(std::string_view key, std::string_view queue, std::string_view ticket) {
  const std::string leases = store::queue_lease_key(queue);
  try {
    m_core.run({{"EVAL", k_leave_queue_script, "3", key, queue, leases, ticket}, key});
  } catch (const Error& e) {
    if (!migrating(e) && !queue_forbidden(e)) {
      throw;
    }
    // The entry's lease lapses instead.
  }
}

std::unique_ptr<Watcher> RedisQueue::watch_turn(std::string_view key, std::string ticket) {
  return m_core.subscribe(key, std::move(ticket));
}

}  // namespace nxlock::store
