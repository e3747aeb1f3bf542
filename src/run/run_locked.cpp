// run_locked: environment, supervision, then one release for every path, then the reaping.
#include "run/run_locked.hpp"

#include <cstdlib>
#include <exception>

#include "run/supervisor.hpp"
#include "run/watchdog.hpp"
#include "util/error.hpp"
#include "util/redact.hpp"

namespace nxlock::run {

namespace {

// Everything the child finds in its environment from us, set in this one place.
// The child gets no password of ours unless asked (--inherit-credentials): it
// may print its environment (a CI log, a crash report) or pass it on further.
// A password-bearing NXLOCK_URL stays, redacted: an nxlock inside the job then
// fails loudly on authentication rather than quietly using another backend.
void set_child_environment(const lock::Lockable& lock, const HeldLock& held,
                           const RunOptions& options) {
  setenv("NXLOCK_KEY", lock.key().c_str(), 1);
  setenv("NXLOCK_VALUE", held.value.c_str(), 1);
  if (lock.fence() > 0) {
    setenv("NXLOCK_FENCE", std::to_string(lock.fence()).c_str(), 1);
  } else {
    unsetenv("NXLOCK_FENCE");  // none issued (a quorum): never an outer job's token
  }
  if (options.inherit_credentials) {
    return;
  }
  for (const char* name : {"NXLOCK_PASSWORD", "REDISCLI_AUTH", "NXLOCK_SENTINEL_PASSWORD"}) {
    unsetenv(name);
  }
  if (const char* url = std::getenv("NXLOCK_URL")) {
    const std::string redacted = util::redact_secrets(url);
    if (redacted != url) {
      setenv("NXLOCK_URL", redacted.c_str(), 1);
    }
  }
}

}  // namespace

RunLockedOutcome run_locked(lock::Lockable& lock, HeldLock& held, const RunOptions& options,
                            SignalChannel& signals, const Reporter& reporter) {
  set_child_environment(lock, held, options);
  RunLockedOutcome outcome;
  JobWatchdog watchdog;
  std::exception_ptr failure;
  try {
    outcome.job = supervise(lock, held, options, signals, reporter, watchdog);
  } catch (...) {
    failure = std::current_exception();
    watchdog.stop_job();  // the job must not outlive the lock: stopped before it is released
  }

  // The one release, for every path but a lost lock (then it is someone else's).
  if (failure || !outcome.job.lost) {
    // --hold keeps the lock of a job that ran; one that never started (126,
    // 127), or our own failure, did nothing worth holding for: it goes at once.
    const bool ran = outcome.job.ending == RunOutcome::Ending::exited ||
                     outcome.job.ending == RunOutcome::Ending::signaled;
    ReleaseStep release_one;
    if (!failure && ran && options.hold > util::Micros(0)) {
      release_one = [&](const std::string& value) {
        return lock.release_after(value, options.acquired_at + options.hold, outcome.kept_value);
      };
    }
    try {
      outcome.released = release_held(lock, held, release_one);
    } catch (const util::Error& e) {
      // The child's status is what cron reports: a release that got no answer
      // is for the caller to mention (the lock then simply expires).
      outcome.release_error = e.what();
    }
  }
  watchdog.reap();  // after the release: the next holder need not wait on it
  if (failure) {
    std::rethrow_exception(failure);
  }
  return outcome;
}

}  // namespace nxlock::run
