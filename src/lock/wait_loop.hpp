// The wait of acquire(), written once for one server (Lock) and a quorum
// (QuorumLock): look, and between looks sleep until a wake-up, the holder's
// expiry or a jittered tick, within the policy's deadline, showing progress.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lock/clock.hpp"
#include "lock/lockable.hpp"
#include "lock/queue_ticket.hpp"
#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock {

// What one look at the lock found.
struct Look {
  enum class Found {
    acquired,  // taken: the wait returns `taken`
    again,     // look again at once (the key changed under us)
    busy,      // held by another: wait for it, until the deadline
    pause,     // not held by anyone, not ours either (two takers split a quorum):
               // look again after `pause`, without a wake-up
    crowded,   // WaitPolicy::max_waiters or more live waiters are ahead (`ahead`):
               // the wait returns `crowded` at once
  };
  Found found = Found::busy;
  AcquireResult taken;  // acquired
  // The holder's expiry as this look saw it, for progress and the final
  // answer; nullopt leaves the last look's.
  std::optional<std::int64_t> held_until;
  std::int64_t now_seconds = 0;  // busy, pause: the clock reading of the look
  // busy: the expiry to wake just after (nullopt: a poll tick decides), and
  // whether another queued waiter goes first (a queue tick decides).
  std::optional<std::int64_t> wake_at;
  bool behind = false;
  // behind: the waiters ahead to pace the next look by (pacing::jittered_queue_tick);
  // crowded: the live waiters ahead.
  std::int64_t ahead = 0;
  // pause: how long, and whether it is taken even once the deadline passed.
  util::Micros pause{0};
  bool pause_when_late = false;
};

struct WaitSteps {
  // One look. Throws util::Error; an unavailable one is waited out like a
  // busy lock once the wake-ups are armed (a restart, a failover), and said
  // at once before that (a wrong URL, a dead server).
  std::function<Look()> look;
  // Arms the wake-ups (a store watch); true if it armed one it did not have,
  // so that a release between the last look and the watch is not missed.
  std::function<bool()> arm;
  // Sleeps until a wake-up, `timeout`, or the interrupt descriptor. `busy` is
  // the look waited on, or nullptr when waiting out a failure.
  std::function<store::WaitResult(util::Micros timeout, int interrupt_fd, const Look* busy)> wait;
};

// A look's `taken` for a lock taken with `value`.
AcquireResult taken_with(std::string value, std::int64_t now_seconds, util::Micros valid_from,
                         std::int64_t fence);

// Sets steps.arm and steps.wait to wait on one watch of `key`, kept in
// `watcher`: as the queued waiter `ticket` when there is one (a release then
// wakes the first waiter only, and one behind sleeps through the key's
// changes), else on every change of the key.
void watch_key(WaitSteps& steps, store::Store& store, const std::string& key,
               const std::optional<QueueTicket>& ticket, std::unique_ptr<store::Watcher>& watcher);

// Looks until the lock is taken, the policy's deadline passes (busy) or its
// interrupt descriptor is readable (interrupted). Reads `clock` to sleep until
// just past a holder's expiry; calls policy.on_wait before each wait and at
// least once a second while waiting.
AcquireResult wait_for_lock(const WaitPolicy& policy, Clock& clock, const WaitSteps& steps);

}  // namespace nxlock::lock
