// Supervisor: runs the child of run-locked while its lock is held, renews the lock,
// forwards signals, reacts to a lost lock, and reports how the child ended.
// Used by run_locked(); nothing outside run/ calls it.
#pragma once

#include <functional>
#include <string>

#include "run/run_locked.hpp"
#include "run/watchdog.hpp"

namespace nxlock::run {

// The job, as supervise() leaves it: ended, with its outcome, or ended with
// its wait status still on its way from the watchdog (`status_pending`): the
// lock can be released before that, and collect_status() then waits for it.
struct Supervised {
  RunOutcome job;
  bool status_pending = false;
};

// Starts the child (own process group, parent-death signal, our original signal
// mask, `environment`) under `watchdog` (prepared here unless it was before),
// records `options.holder` beside the lock, and supervises the child until it
// ends, renewing `held` as it goes. Backend failures are retried while the lock
// is still valid; a lock that could have expired without a renewal confirmed
// is lost. Throws util::Error (unavailable) without starting the child if
// `held` is no longer valid. Does not release the lock.
Supervised supervise(lock::Lockable& lock, HeldLock& held, const RunOptions& options,
                     const std::vector<JobWatchdog::EnvSetting>& environment,
                     SignalChannel& signals, const Reporter& reporter, JobWatchdog& watchdog);

// Fills in the job's ending from the watchdog's report, and disarms it.
void collect_status(Supervised& supervised, JobWatchdog& watchdog);

// Releases `held` (compare-and-delete of its value), retrying backend failures
// with short back-off while the lock is still valid, for at most a few seconds:
// past that it is left to expire at its timestamp. Throws the last util::Error
// if no attempt got an answer.
// `release_one` releases one value (default: lock.release); --hold passes one
// that keeps the lock until the hold's end instead.
using ReleaseStep = std::function<lock::Verdict(const std::string& value)>;
lock::Verdict release_held(lock::Lockable& lock, HeldLock& held, const ReleaseStep& release_one = {});

}  // namespace nxlock::run
