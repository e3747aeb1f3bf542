// FileQueue: the embedded store's waiters' queue (WaitersQueue), an entry of the store
// per lock and a FIFO per waiter (file_queue.cpp; docs/STORE-FORMAT.md, "Operations").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/file/file_core.hpp"
#include "store/store.hpp"

namespace nxlock::store {

// The queue is an entry of the store like any other (`queue`), one line per
// waiter, "TICKET ARRIVAL LEASE_UNTIL BOOT" (microseconds on CLOCK_BOOTTIME),
// in arrival order. Each queued waiter has a FIFO, STORE/wait/TICKET, that it
// holds open while it waits: a release writes a byte into the first live
// waiter's, and a FIFO that nobody holds open any more (ENXIO) is a waiter
// that died, passed over at once.
class FileQueue final : public WaitersQueue {
 public:
  // `steps` is the store this queue belongs to: its SETNX, GET and
  // compare-and-delete are the queue's steps on the lock.
  FileQueue(FileCore& core, Store& steps) : m_core(core), m_steps(steps) {}

  QueuedSet take_or_queue(std::string_view key, std::string_view value, std::string_view counter,
                          std::string_view queue, std::string_view ticket, bool waiting,
                          util::Micros lease, StepPolicy policy) override;
  bool release_and_wake(std::string_view key, std::string_view expected, const Fence& fence,
                        std::string_view queue, StepPolicy policy) override;
  void leave(std::string_view key, std::string_view queue, std::string_view ticket) override;
  std::unique_ptr<Watcher> watch_turn(std::string_view key, std::string ticket) override;

  // ---- For the store's other parts ----

  // Leaves the queue a take_or_queue() took the lock from, if it did: the
  // store calls it before each write and at close. Best effort: an entry not
  // dropped lapses with its lease.
  void leave_now();
  // A watch on key (Store::watch), which only_for() turns into a queued one.
  std::unique_ptr<FileWatcher> watch_key(std::string_view key);

  // Whether `ticket` may go first: no live waiter in `queue`, or `ticket` is
  // the first; `in_line` says whether a live one (or `ticket`) is in it. An
  // unlocked read: the gate is advice that only the first waiter passes.
  bool may_go_first(std::string_view queue, std::string_view ticket, bool& in_line);
  // The queue's upkeep for a waiter that did not take: drops lapsed entries
  // (`pruned`), and with `waiting` joins `ticket` or renews its lease. Returns
  // the first ticket in line (empty: none), and in `ahead` the live waiters
  // before `ticket` (all of them, if it is not in line), in the same transaction.
  std::string keep_in_line(std::string_view queue, std::string_view ticket, bool waiting,
                           util::Micros lease, bool& pruned, std::int64_t& ahead);
  // Wakes the first live waiter of `queue`, dropping the dead ones it meets.
  void wake_first(std::string_view queue);
  void drop_from_queue(std::string_view queue, const std::vector<std::string>& tickets);
  // The tickets of a queue entry's waiters that still hold a lease, in arrival order.
  static std::vector<std::string> live_tickets(const std::string& queue_text);

 private:
  // Buckets::update() of the queue's entry, after leaving the queue a SETNX
  // took the lock from (as every write of the store does).
  void mutate(std::string_view key, bool may_insert, const Buckets::Decide& decide);
  util::UniqueFd make_fifo(const std::string& ticket);
  void remove_fifo(const std::string& ticket);
  // Removes `ticket`'s FIFO if nobody holds it open (its waiter died). True if
  // it is gone.
  bool reap_fifo(const std::string& ticket);

  FileCore& m_core;
  Store& m_steps;
  // The queue a SETNX took the lock from, left at the store's next write
  // (leave_now()) or close: see take_or_queue().
  struct Leaving {
    std::string queue;
    std::string ticket;
  };
  std::optional<Leaving> m_leaving;
};

}  // namespace nxlock::store
