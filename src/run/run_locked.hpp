// run-locked's whole lifetime under a taken lock: the child's environment, the
// supervision, the release on every path, and an outcome the CLI puts in words.
#pragma once

#include "lock/lockable.hpp"
#include "run/run_options.hpp"
#include "run/signals.hpp"
#include "run/watchdog.hpp"

namespace nxlock::run {

// Runs options.command while `held` is held: sets the child's environment
// (NXLOCK_KEY, NXLOCK_VALUE, NXLOCK_FENCE, NXLOCK_SLOT; no credentials unless asked), starts and
// supervises it (renewal, signals, the lost-lock policy) under `watchdog`,
// prepared already if the lock was waited for (JobWatchdog::prepare), releases
// the lock on every path that did not lose it, as soon as the job's process
// has ended, and reaps every helper process before it returns. Throws
// util::Error if supervision fails; the job is then stopped and the lock
// released before the error propagates.
RunLockedOutcome run_locked(lock::Lockable& lock, HeldLock& held, const RunOptions& options,
                            SignalChannel& signals, const Reporter& reporter,
                            JobWatchdog& watchdog, lock::ReplaceRequests* requests = nullptr);

}  // namespace nxlock::run
