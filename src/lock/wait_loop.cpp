// wait_for_lock: the one wait loop of Lock::acquire and QuorumLock::acquire.
#include "lock/wait_loop.hpp"

#include <algorithm>
#include <string>

#include "lock/pacing.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

AcquireResult taken_with(std::string value, std::int64_t now_seconds, util::Micros valid_from,
                         std::int64_t fence) {
  AcquireResult taken;
  taken.outcome = AcquireResult::Outcome::acquired;
  taken.value = std::move(value);
  taken.now_seconds = now_seconds;
  taken.valid_from = valid_from;
  taken.fence = fence;
  return taken;
}

void watch_key(WaitSteps& steps, store::Store& store, const std::string& key,
               const std::optional<QueueTicket>& ticket, std::unique_ptr<store::Watcher>& watcher) {
  steps.arm = [&store, &key, &ticket, &watcher] {
    if (watcher) {
      return false;
    }
    watcher = ticket ? store.queue()->watch_turn(key, ticket->ticket()) : store.watch(key);
    return true;
  };
  steps.wait = [&watcher](util::Micros timeout, int interrupt_fd, const Look* busy) {
    if (busy) {
      watcher->first(!busy->behind);
    }
    return watcher->wait(timeout, interrupt_fd);
  };
}

using util::Micros;

AcquireResult wait_for_lock(const WaitPolicy& policy, Clock& clock, const WaitSteps& steps) {
  const bool forever = !policy.wait_for.has_value();
  const Micros started = util::mono_now();
  const Micros deadline = started + policy.wait_for.value_or(Micros(0));
  // `timeout`, cut to what is left of the wait at `now_mono`.
  const auto within_wait = [&](Micros timeout, Micros now_mono) {
    return forever ? timeout : std::min(timeout, deadline - now_mono);
  };
  bool armed = false;
  std::int64_t last_held_until = 0;
  const auto interrupted = [&] {
    return AcquireResult{AcquireResult::Outcome::interrupted, {}, last_held_until, {}};
  };

  for (;;) {
    Look look;
    try {
      look = steps.look();
    } catch (const util::Error& e) {
      // Once waiting (the wake-ups are armed, so the backend answered before),
      // a backend that fails for a while (a restart, a failover) is waited out
      // like a busy lock, until the wait's own deadline. A first look that
      // fails is a wrong URL or a dead server, said at once.
      const Micros now_mono = util::mono_now();
      if (!armed || e.kind() != util::ErrorKind::unavailable ||
          (!forever && now_mono >= deadline)) {
        throw;
      }
      util::trace(std::string("waiting on: ") + e.what());
      const Micros timeout = within_wait(pacing::jittered_poll(), now_mono);
      if (steps.wait(timeout, policy.interrupt_fd, nullptr) == store::WaitResult::interrupted) {
        return interrupted();
      }
      continue;
    }
    if (look.held_until) {
      last_held_until = *look.held_until;
    }
    if (look.found == Look::Found::acquired) {
      return look.taken;
    }
    if (look.found == Look::Found::again) {
      continue;
    }
    if (look.found == Look::Found::crowded) {
      AcquireResult crowded{AcquireResult::Outcome::crowded, {}, last_held_until, {},
                            look.now_seconds};
      crowded.waiters_ahead = look.ahead;
      return crowded;
    }
    const Micros now_mono = util::mono_now();
    const bool out_of_time = !forever && now_mono >= deadline;
    if (out_of_time && !(look.found == Look::Found::pause && look.pause_when_late)) {
      return {AcquireResult::Outcome::busy,
              {},
              last_held_until,
              std::to_string(last_held_until),
              look.now_seconds};
    }
    if (look.found == Look::Found::pause) {
      if (util::readable_before(policy.interrupt_fd, util::mono_now() + look.pause)) {
        return interrupted();
      }
      continue;
    }
    // Arm the wake-ups, then look again: a release between our last look and
    // the watch would otherwise go unseen until the next poll tick.
    const bool newly_armed = steps.arm();
    if (!armed || newly_armed) {
      armed = true;
      continue;
    }
    // Wake at the holder's expiry, a release, or a poll tick; a waiter behind
    // another one is told by its next step (which renews its place) when it is first.
    Micros timeout = look.behind    ? pacing::jittered_queue_tick(look.ahead)
                     : look.wake_at ? pacing::until_next_look(*look.wake_at, clock.now())
                                    : pacing::jittered_poll();
    timeout = within_wait(timeout, now_mono);
    if (policy.on_wait) {
      policy.on_wait(WaitProgress{last_held_until, look.now_seconds, now_mono - started});
      timeout = std::min(timeout, pacing::k_progress_interval);
    }
    if (steps.wait(timeout, policy.interrupt_fd, &look) == store::WaitResult::interrupted) {
      return interrupted();
    }
  }
}

}  // namespace nxlock::lock
