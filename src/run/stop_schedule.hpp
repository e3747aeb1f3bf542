// StopSchedule: when a job whose lock was not renewed in time is stopped, shared by nxlock and its watchdog.
#pragma once

#include <algorithm>
#include <cstdint>

#include "util/time.hpp"

namespace nxlock::run {

// The deadline both sides count from is the lock's validity as the last
// confirmed renewal (or the acquisition) left it: the monotonic time its
// request was sent, plus the ttl, minus a quorum's drift margin. It can only
// run early: the lock's value is `now + ttl + 1` in whole seconds, so another
// client can take it no sooner than ttl + 1 s after the write.
//
// SIGKILL goes this long before the deadline: the watchdog may wake late on a
// loaded host, and the kill itself takes a moment. With the second the value
// keeps beyond the deadline, the job is gone 1.1 s before anyone can take the
// lock; and the margin is short, as it comes out of the time renewal has to
// ride out a failing backend.
inline constexpr util::Micros k_kill_margin{100'000};
// The watchdog acts by itself this long after nxlock would have, so that a
// renewal confirmed at the last moment reaches it first; never past the kill.
// Short: when nxlock is stopped, it comes out of the job's grace.
inline constexpr util::Micros k_watchdog_lag{50'000};
// The grace between SIGTERM and SIGKILL, when the lock runs out, is at most
// this share of the ttl (a fifth of the renewal interval): it comes out of the
// time renewal has to ride out a backend that fails for a while (a restart, a
// failover), from a third of the ttl to the SIGTERM, and that time matters
// more: a job that keeps its lock needs no grace. But never less than this
// floor (unless --kill-after is): a shell's trap waits for the command it
// runs, and a loaded host schedules late.
inline constexpr std::int64_t k_grace_share_of_ttl = 15;
inline constexpr util::Micros k_grace_floor{300'000};

struct StopSchedule {
  bool enforced = true;    // false for --on-lost ignore: the job is never stopped
  util::Micros grace{0};   // SIGTERM this long before SIGKILL; zero: SIGKILL alone

  // SIGKILL, at the latest: every process of the job is gone by then.
  util::Micros kill_at(util::Micros deadline) const { return deadline - k_kill_margin; }
  // No renewal confirmed by then: nxlock gives up on the lock and stops the job.
  util::Micros term_at(util::Micros deadline) const { return kill_at(deadline) - grace; }
  // The watchdog's own SIGTERM, if nxlock has not acted (stopped, hung).
  util::Micros watchdog_term_at(util::Micros deadline) const {
    return std::min(term_at(deadline) + k_watchdog_lag, kill_at(deadline));
  }
  // How long before the deadline nxlock stops renewing and acts.
  util::Micros lead() const { return enforced ? k_kill_margin + grace : util::Micros(0); }
};

// The schedule for a job: `kill_after` is --kill-after (ignored when `kill_at_once`,
// --on-lost kill), `ttl` the lock's, in seconds.
inline StopSchedule stop_schedule(bool enforced, bool kill_at_once, util::Micros kill_after,
                                  std::int64_t ttl) {
  StopSchedule schedule;
  schedule.enforced = enforced;
  if (!kill_at_once) {
    const util::Micros share(ttl * 1'000'000 / k_grace_share_of_ttl);
    schedule.grace = std::min(kill_after, std::max(share, k_grace_floor));
  }
  return schedule;
}

}  // namespace nxlock::run
