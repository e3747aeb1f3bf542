// run_locked: the stages in order (stages.hpp): start the job, supervise it,
// release the lock on every path that did not lose it, record how the job
// ended, reap.
#include "run/run_locked.hpp"

#include <exception>
#include <utility>

#include "run/stages.hpp"

namespace nxlock::run {

RunLockedOutcome run_locked(lock::Lockable& lock, HeldLock& held, const RunOptions& options,
                            SignalChannel& signals, const Reporter& reporter,
                            JobWatchdog& watchdog, lock::ReplaceRequests* requests) {
  LockedRun run{lock,
                held,
                options,
                stop_schedule(options.on_lost != OnLost::ignore, options.on_lost == OnLost::kill,
                              options.kill_after, options.ttl),
                signals,
                reporter,
                watchdog,
                requests};
  Supervised supervised;
  std::exception_ptr failure;
  try {
    const Job job = start_job(run);
    if (job.exec_error == 0 && reporter.started) {
      reporter.started();  // beside the job, never before it: --ping's start
    }
    supervised =
        job.exec_error != 0 ? Supervised{exec_failure(job.exec_error)} : supervise(run, job);
    // The terminal is ours again here, as `job` goes.
  } catch (...) {
    failure = std::current_exception();
    watchdog.stop_job();  // the job must not outlive the lock: stopped before it is released
  }

  RunLockedOutcome outcome;
  // The release is ours from here: a watchdog that outlived us must not make
  // it again, after a next holder may have written the same value.
  watchdog.disarm();
  // The one release, for every path but a lost lock (then it is someone else's).
  if (failure || !supervised.job.lost) {
    // --hold keeps the lock of a job that ran; one that never started (126,
    // 127), or our own failure, did nothing worth holding for: it goes at once.
    // A replaced job's lock goes at once: its replacer waits for it.
    Released released =
        release(run, !failure && supervised.job.ran() && !supervised.job.replaced);
    outcome.released = released.verdict;
    outcome.release_error = std::move(released.error);
    outcome.kept_value = std::move(released.kept_value);
  }
  // After the release: the next holder need not wait for our watchdog.
  outcome.job = collect_exit_status(std::move(supervised), watchdog);
  watchdog.reap();
  if (failure) {
    std::rethrow_exception(failure);
  }
  return outcome;
}

}  // namespace nxlock::run
