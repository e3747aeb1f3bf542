// run-locked's stages, in the order run_locked() goes through them: start the
// job, supervise it, release the lock, record how the job ended. Internal to run/.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "run/release_retry.hpp"
#include "run/run_options.hpp"
#include "run/signals.hpp"
#include "run/stop_schedule.hpp"
#include "run/terminal.hpp"
#include "run/watchdog.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// One run-locked: the lock, how its job is to run, and the helpers every stage works with.
struct LockedRun {
  lock::Lockable& lock;
  HeldLock& held;
  const RunOptions& options;
  StopSchedule schedule;  // when a job whose lock runs out is stopped
  SignalChannel& signals;
  const Reporter& reporter;
  JobWatchdog& watchdog;
  // Where a --replace request for this lock would stand; nullptr where the
  // backend keeps none (the holder then cannot be asked).
  lock::ReplaceRequests* requests = nullptr;

  // Whether this run looks for a --replace request (its holder record says so).
  bool askable() const { return requests != nullptr && options.renew; }

  // The job must be stopping by then, unless a renewal moves it on.
  util::Micros act_by() const { return held.valid_until - schedule.lead(); }
};

// --- start_job.cpp

// The job as start_job() leaves it: running, or never started (exec_error).
struct Job {
  pid_t pid = -1;            // the job, leader of its own process group
  int exec_error = 0;        // errno of a failed exec (the watchdog is disarmed), else 0
  TerminalHandoff terminal;  // the job's foreground while this lives
};

// Starts the job under the watchdog (prepared here unless it was before): the
// child's environment (NXLOCK_KEY, NXLOCK_VALUE, NXLOCK_FENCE, NXLOCK_SLOT; no credentials
// unless asked), the lock's deadline, the terminal; then records the holder's
// details beside the lock. Throws util::Error (unavailable) without
// starting it if the lock is no longer surely held.
Job start_job(LockedRun& run);

// --- supervise.cpp

// The job, as supervise() leaves it: ended, with its outcome, or ended with
// its wait status still on its way from the watchdog (`status_pending`): the
// lock can be released before that, and collect_exit_status() then waits for it.
struct Supervised {
  RunOutcome job;
  bool status_pending = false;
};

// Supervises the running `job` until it ends: forwards signals, renews the
// lock (renewal.hpp) and tells the watchdog each new deadline, and carries out
// the lost-lock policy. Backend failures are retried while the lock is still
// valid; a lock that could have expired without a renewal confirmed is lost.
// Does not release the lock. Throws util::Error if waiting fails.
Supervised supervise(LockedRun& run, const Job& job);

// --- release.cpp

// How the release at the end went (RunLockedOutcome's released, release_error
// and kept_value).
struct Released {
  std::optional<lock::Verdict> verdict;  // the store's, if an attempt got an answer
  std::string error;                     // else why not (the lock then expires)
  std::string kept_value;  // --hold: the value that keeps the lock until the hold ends
};

// The one release at the end (compare-and-delete of the held value), retried
// through backend failures while the lock is valid, for a few seconds at
// most. With `keep_for_hold` (a job that ran, under --hold) the lock stays
// until the hold's end instead.
Released release(LockedRun& run, bool keep_for_hold);

// release_with_retries() of `held`: its value, or one a renewal may have written.
lock::Verdict release_held(const HeldLock& held, const ReleaseStep& release_one);

// The values `held` may have, as `unlock` takes them (a slot's SLOT:EXPIRY),
// the held one first; and `planned`, a renewal's about to be written, if given:
// what the watchdog releases if we die.
std::vector<std::string> release_values(const lock::Lockable& lock, const HeldLock& held,
                                        const std::string* planned = nullptr);

// --- job_status.cpp: the job's ending and exit status, mapped here alone

// `job`, ended with the wait status `wait_status`: its exit status, or 128 +
// the signal that killed it, as flock(1) and the shells report it.
RunOutcome with_exit_status(RunOutcome job, int wait_status);

// The ending of a job whose exec failed with `error`: 127 (not found) or 126.
RunOutcome exec_failure(int error);

// The supervised job's outcome, with its status: a pending one
// (Supervised::status_pending) is waited for from the watchdog, which is then
// disarmed.
RunOutcome collect_exit_status(Supervised supervised, JobWatchdog& watchdog);

}  // namespace nxlock::run
