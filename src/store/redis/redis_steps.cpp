// RedisStore's steps (Store): each one command or script, lock writes through the write path.
#include "store/redis/redis_store.hpp"

#include <hiredis/hiredis.h>

#include "store/redis/scripts.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using redis::Command;
using redis::integer_of;
using redis::is_pair;
using redis::k_compare_and_delete_fenced_script;
using redis::k_compare_and_delete_script;
using redis::k_compare_and_set_fenced_script;
using redis::k_compare_and_set_script;
using redis::k_get_and_set_fenced_script;
using redis::k_set_if_absent_fenced_script;
using redis::Reply;
using redis::said_one;
using redis::string_of;
using redis::throw_unexpected;
using redis::wake_channel;

// A token from a fenced script: an integer, or nil when the step did not own.
std::optional<std::int64_t> fence_of(const redisReply& reply, const std::string& name) {
  if (reply.type == REDIS_REPLY_NIL) {
    return std::nullopt;
  }
  return integer_of(reply, name);
}

bool is_token(const redisReply& reply) {
  return reply.type == REDIS_REPLY_INTEGER;
}

bool is_string(const redisReply& reply) {
  return reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_NIL;
}

}  // namespace

SetIfAbsent RedisStore::set_if_absent(std::string_view key, std::string_view value,
                                      std::optional<std::string_view> counter, StepPolicy policy) {
  // An unconfirmed set is deleted again. The counter keeps its step: tokens
  // need only grow, never be dense.
  const auto undo = [&](const redisReply&) {
    compare_and_delete(key, value, std::nullopt, policy);
  };
  if (!counter) {
    const auto reply = m_core.write({{"SETNX", key, value}, key}, said_one, undo);
    return {integer_of(*reply, m_core.name()) == 1, std::nullopt};
  }
  // A script, not SETNX then INCR: see k_set_if_absent_fenced_script.
  const std::string keep = RedisCore::lock_keep_ms(policy.lifetime);
  const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
  const auto reply = m_core.write(
      {{"EVAL", k_set_if_absent_fenced_script, "2", key, *counter, value, keep, counter_keep}, key},
      is_token, undo);
  const auto fence = fence_of(*reply, m_core.name());
  return {fence.has_value(), fence};
}

std::optional<std::string> RedisStore::get(std::string_view key) {
  const auto reply = m_core.run({{"GET", key}, key});
  return string_of(*reply, m_core.name());
}

Swap RedisStore::get_and_set(std::string_view key, std::string_view value,
                             std::optional<Takeover> takeover, StepPolicy policy) {
  // An unconfirmed swap gives the old value back (or deletes ours).
  const auto give_back = [&](const std::optional<std::string>& old) {
    if (old) {
      compare_and_set(key, value, *old, std::nullopt, policy);
    } else {
      compare_and_delete(key, value, std::nullopt, policy);
    }
  };
  if (!takeover) {
    // GETSET rather than SET ... GET: the documented pattern names GETSET, and
    // it works on servers older than 6.2.
    const auto reply =
        m_core.write({{"GETSET", key, value}, key}, is_string,
                     [&](const redisReply& r) { give_back(string_of(r, m_core.name())); });
    return {string_of(*reply, m_core.name()), std::nullopt};
  }
  // A script, not GETSET then INCR: see k_get_and_set_fenced_script. On the
  // server's own clock the script decides with TIME at the instant of the
  // step: never on an estimate carried from an earlier reply, which a slow
  // exchange can leave running ahead of the server.
  const std::string now = policy.own_clock ? std::string() : std::to_string(takeover->now_seconds);
  const std::string keep = RedisCore::lock_keep_ms(policy.lifetime);
  const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
  const auto reply = m_core.write(
      {{"EVAL", k_get_and_set_fenced_script, "2", key, takeover->counter, value, now, keep,
        counter_keep},
       key},
      [](const redisReply& r) { return is_pair(r) && is_token(*r.element[1]); },
      [&](const redisReply& r) { give_back(string_of(*r.element[0], m_core.name())); });
  if (!is_pair(*reply)) {
    throw_unexpected(*reply, m_core.name());
  }
  Swap swap{string_of(*reply->element[0], m_core.name()),
            fence_of(*reply->element[1], m_core.name())};
  swap.written = swap.fence.has_value();  // the script compares first
  return swap;
}

void RedisStore::set(std::string_view key, std::string_view value, StepPolicy policy) {
  // A lock's holder details expire with it (StepPolicy); SET PX is one step.
  if (policy.lifetime > util::Micros(0)) {
    const std::string ms = RedisCore::lock_keep_ms(policy.lifetime);
    m_core.run({{"SET", key, value, "PX", ms}, key});
    return;
  }
  m_core.run({{"SET", key, value}, key});
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
    auto replies = m_core.exchange(std::move(commands), del.key);
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
        throw_reply_error(*each, one, m_core.name());
      }
      removed += static_cast<std::size_t>(integer_of(*each, m_core.name()));
    }
    return removed;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    throw_reply_error(*reply, command, m_core.name());
  }
  return static_cast<std::size_t>(integer_of(*reply, m_core.name()));
}

bool RedisStore::compare_and_delete(std::string_view key, std::string_view expected,
                                    std::optional<Fence> fence, StepPolicy policy) {
  const std::string channel = wake_channel(key);
  if (!fence) {
    // A script, not GET then DEL: see k_compare_and_delete_script.
    const auto reply =
        m_core.run({{"EVAL", k_compare_and_delete_script, "1", key, expected, channel}, key});
    return integer_of(*reply, m_core.name()) == 1;
  }
  // A script: see k_compare_and_delete_fenced_script.
  const std::string token = std::to_string(fence->token);
  const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
  const auto reply = m_core.run({{"EVAL", k_compare_and_delete_fenced_script, "2", key,
                                  fence->counter, expected, token, channel, counter_keep},
                                 key});
  return integer_of(*reply, m_core.name()) == 1;
}

bool RedisStore::compare_and_set(std::string_view key, std::string_view expected,
                                 std::string_view value, std::optional<Fence> fence,
                                 StepPolicy policy) {
  const std::string keep = RedisCore::lock_keep_ms(policy.lifetime);
  // An unconfirmed swap goes back to `expected`: the caller (a renewal)
  // retries from the value it knows.
  if (!fence) {
    // A script, not GET then SET: see k_compare_and_set_script.
    const auto swap = [&](std::string_view from, std::string_view to) {
      return Command{{"EVAL", k_compare_and_set_script, "1", key, from, to, keep}, key};
    };
    const auto reply = m_core.write(swap(expected, value), said_one,
                                    [&](const redisReply&) { m_core.run(swap(value, expected)); });
    return integer_of(*reply, m_core.name()) == 1;
  }
  // A script: see k_compare_and_set_fenced_script.
  const std::string token = std::to_string(fence->token);
  const std::string counter_keep = RedisCore::counter_keep_ms(policy.lifetime);
  const auto swap = [&](std::string_view from, std::string_view to) {
    return Command{{"EVAL", k_compare_and_set_fenced_script, "2", key, fence->counter, from, to,
                    token, keep, counter_keep},
                   key};
  };
  const auto reply = m_core.write(swap(expected, value), said_one,
                                  [&](const redisReply&) { m_core.run(swap(value, expected)); });
  return integer_of(*reply, m_core.name()) == 1;
}

}  // namespace nxlock::store
