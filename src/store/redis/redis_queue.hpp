// RedisQueue: a Redis server's waiters' queue (WaitersQueue), a sorted set beside the lock
// kept by Lua scripts (redis_queue.cpp; the scripts in scripts.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/redis/redis_core.hpp"
#include "store/store.hpp"

namespace nxlock::store {

class RedisQueue final : public WaitersQueue {
 public:
  // `steps` is the store this queue belongs to: its steps stand in for the
  // queue's where the queue cannot be kept (a slot migrating, an ACL).
  RedisQueue(RedisCore& core, Store& steps) : m_core(core), m_steps(steps) {}

  QueuedSet take_or_queue(std::string_view key, std::string_view value, std::string_view counter,
                          std::string_view queue, std::string_view ticket, bool waiting,
                          util::Micros lease, StepPolicy policy) override;
  bool release_and_wake(std::string_view key, std::string_view expected, const Fence& fence,
                        std::string_view queue, StepPolicy policy) override;
  void leave(std::string_view key, std::string_view queue, std::string_view ticket) override;
  std::unique_ptr<Watcher> watch_turn(std::string_view key, std::string ticket) override;

 private:
  RedisCore& m_core;
  Store& m_steps;
  bool m_forbidden = false;  // the ACL refused the queue's script once: no more tries
};

}  // namespace nxlock::store
