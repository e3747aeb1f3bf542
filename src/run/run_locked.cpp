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

// Everything the child finds in its environment from us, decided in this one
// place and applied by the watchdog to its own (ours stays as it was).
// The child gets no password of ours unless asked (--inherit-credentials): it
// may print its environment (a CI log, a crash report) or pass it on further.
// A password-bearing NXLOCK_URL stays, redacted: an nxlock inside the job then
// fails loudly on authentication rather than quietly using another backend.
std::vector<JobWatchdog::EnvSetting> child_environment(const lock::Lockable& lock,
                                                       const HeldLock& held,
                                                       const RunOptions& options) {
  std::vector<JobWatchdog::EnvSetting> settings = {
      {"NXLOCK_KEY", lock.key()},
      {"NXLOCK_VALUE", held.value},
      // None issued (a quorum): never an outer job's token.
      {"NXLOCK_FENCE",
       lock.fence() > 0 ? std::optional(std::to_string(lock.fence())) : std::nullopt},
  };
  if (options.inherit_credentials) {
    return settings;
  }
  for (const char* name : {"NXLOCK_PASSWORD", "REDISCLI_AUTH", "NXLOCK_SENTINEL_PASSWORD"}) {
    settings.push_back({name, std::nullopt});
  }
  if (const char* url = std::getenv("NXLOCK_URL")) {
    const std::string redacted = util::redact_secrets(url);
    if (redacted != url) {
      settings.push_back({"NXLOCK_URL", redacted});
    }
  }
  return settings;
}

}  // namespace

RunLockedOutcome run_locked(lock::Lockable& lock, HeldLock& held, const RunOptions& options,
                            SignalChannel& signals, const Reporter& reporter,
                            JobWatchdog& watchdog) {
  RunLockedOutcome outcome;
  Supervised supervised;
  std::exception_ptr failure;
  try {
    supervised = supervise(lock, held, options, child_environment(lock, held, options), signals,
                           reporter, watchdog);
  } catch (...) {
    failure = std::current_exception();
    watchdog.stop_job();  // the job must not outlive the lock: stopped before it is released
  }

  // The one release, for every path but a lost lock (then it is someone else's).
  if (failure || !supervised.job.lost) {
    // --hold keeps the lock of a job that ran; one that never started (126,
    // 127), or our own failure, did nothing worth holding for: it goes at once.
    const bool ran = supervised.job.ending == RunOutcome::Ending::exited ||
                     supervised.job.ending == RunOutcome::Ending::signaled;
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
  // After the release: the next holder need not wait for our watchdog.
  collect_status(supervised, watchdog);
  outcome.job = supervised.job;
  watchdog.reap();
  if (failure) {
    std::rethrow_exception(failure);
  }
  return outcome;
}

}  // namespace nxlock::run
