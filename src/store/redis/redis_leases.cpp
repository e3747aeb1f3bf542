// RedisLeases, a Redis server's leased holders (SharedLeases): take, renew, release,
// record_details, read.
#include <hiredis/hiredis.h>

#include "store/keys.hpp"
#include "store/lock_value.hpp"
#include "store/redis/redis_leases.hpp"
#include "store/redis/scripts.hpp"
#include "util/error.hpp"

namespace nxlock::store {

namespace {

using redis::integer_of;
using redis::is_pair;
using redis::Reply;
using redis::said_one;
using redis::string_of;
using redis::throw_unexpected;

}  // namespace

SharedLeases::Take RedisLeases::take(const Keys& keys, const TakeRequest& request,
                                     StepPolicy policy) {
  // One script: the queue's gate, the lease, the lock key that covers it and
  // the token, in one atomic step (see k_take_shared_script).
  const std::string queue_leases = store::queue_lease_key(keys.queue);
  const std::string expiry_text = std::to_string(request.expiry);
  const std::string lease_us = std::to_string(request.lease.count());
  const std::string queue_keep = std::to_string(redis::k_queue_keep_ms);
  const std::string lock_keep = RedisCore::lock_keep_ms(policy.lifetime);
  const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
  const std::string slots = std::to_string(request.slots);
  const std::string details = store::details_key(keys.leases);
  const auto taken = [](const redisReply& r) {
    return r.type == REDIS_REPLY_ARRAY && r.elements == 3 &&
           r.element[0]->type == REDIS_REPLY_INTEGER && r.element[0]->integer == 2;
  };
  // A lease that too few replicas confirmed is given back.
  const Reply reply = m_core.write(
      {{"EVAL", redis::k_take_shared_script, "6", keys.lock, keys.counter, keys.leases, keys.queue,
        queue_leases, details, request.id, expiry_text, request.ticket, request.waiting ? "1" : "0",
        lease_us, queue_keep, lock_keep, counter_keep, slots},
       keys.lock},
      taken, [&](const redisReply& r) {
        const std::string id = string_of(*r.element[2], m_core.name()).value_or("");
        release(
            keys,
            {.id = id, .expiry = request.expiry, .token = integer_of(*r.element[1], m_core.name())},
            policy);
      });
  if (taken(*reply)) {
    Take result;
    result.outcome = Take::Outcome::taken;
    result.fence = integer_of(*reply->element[1], m_core.name());
    result.id = string_of(*reply->element[2], m_core.name()).value_or("");
    return result;
  }
  // {outcome, value}, and for a waiter behind, the live waiters ahead of it.
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements > 3) {
    throw_unexpected(*reply, m_core.name());
  }
  Take result;
  const auto outcome = integer_of(*reply->element[0], m_core.name());
  result.outcome = outcome == 1 ? Take::Outcome::held : Take::Outcome::behind;
  result.current = string_of(*reply->element[1], m_core.name());
  if (outcome == 0 && reply->elements > 2) {
    result.ahead = integer_of(*reply->element[2], m_core.name());
  }
  return result;
}

bool RedisLeases::renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
                        StepPolicy policy) {
  const std::string expiry_text = std::to_string(expiry);
  const std::string if_text = lease.expiry ? std::to_string(*lease.expiry) : std::string();
  const std::string token_text = lease.token ? std::to_string(*lease.token) : std::string();
  const std::string lock_keep = RedisCore::lock_keep_ms(policy.lifetime);
  // An unconfirmed renewal is left as it is: the lease keeps at least its old expiry.
  const std::string details = store::details_key(keys.leases);
  const Reply reply =
      m_core.write({{"EVAL", redis::k_renew_shared_script, "4", keys.lock, keys.counter,
                     keys.leases, details, lease.id, expiry_text, lock_keep, if_text, token_text},
                    keys.lock},
                   said_one, [](const redisReply&) {});
  return integer_of(*reply, m_core.name()) == 1;
}

bool RedisLeases::release(const Keys& keys, const LeaseMatch& lease, StepPolicy policy) {
  const std::string queue_leases = store::queue_lease_key(keys.queue);
  const std::string channel = redis::wake_channel(keys.lock);
  const std::string lock_keep = RedisCore::lock_keep_ms(policy.lifetime);
  const std::string if_text = lease.expiry ? std::to_string(*lease.expiry) : std::string();
  const std::string token_text = lease.token ? std::to_string(*lease.token) : std::string();
  const std::string details = store::details_key(keys.leases);
  const Reply reply = m_core.run(
      {{"EVAL", redis::k_release_shared_script, "6", keys.lock, keys.counter, keys.leases,
        keys.queue, queue_leases, details, lease.id, channel, lock_keep, if_text, token_text},
       keys.lock});
  return integer_of(*reply, m_core.name()) == 1;
}

bool RedisLeases::record_details(std::string_view leases, std::string_view id,
                                 std::string_view details) {
  const std::string details_key = store::details_key(leases);
  const Reply reply = m_core.run(
      {{"EVAL", redis::k_record_details_script, "2", leases, details_key, id, details}, leases});
  return said_one(*reply);
}

LeaseSet RedisLeases::read(const Keys& keys) {
  const std::string details = store::details_key(keys.leases);
  const Reply reply = m_core.run(
      {{"EVAL", redis::k_read_leases_script, "4", keys.lock, keys.counter, keys.leases, details},
       keys.lock});
  return redis::lease_set_of(*reply, m_core.name());
}

namespace redis {

LeaseSet lease_set_of(const redisReply& reply, const std::string& name) {
  constexpr std::size_t k_head = 3;  // the lock's value, whether it exists, whether the set holds it
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < k_head ||
      (reply.elements - k_head) % 3 != 0) {
    throw_unexpected(reply, name);
  }
  const auto text = [&](std::size_t i) { return string_of(*reply.element[i], name).value_or(""); };
  LeaseSet set;
  if (text(1) == "1") {
    set.lock_value = text(0);
  }
  set.holding = text(2) == "1";
  for (std::size_t i = k_head; i < reply.elements; i += 3) {
    SharedHolder& holder = set.leases.emplace_back();
    holder.id = text(i);
    holder.expiry = parse_lock_timestamp(text(i + 1)).value_or(0);
    if (auto details = text(i + 2); !details.empty()) {
      holder.details = std::move(details);
    }
  }
  return set;
}

}  // namespace redis

}  // namespace nxlock::store
