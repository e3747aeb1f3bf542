// Starting run-locked's job: the lock still surely held, the child's environment,
// the watchdog's go, the terminal, the holder record.
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lock/holder.hpp"
#include "run/stages.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/redact.hpp"

namespace nxlock::run {

namespace {

// Everything the child finds in its environment from us, decided in this one
// place and applied by the watchdog to its own (ours stays as it was).
// The child gets no password of ours unless asked (--inherit-credentials): it
// may print its environment (a CI log, a crash report) or pass it on further.
// A password-bearing NXLOCK_URL stays, redacted: an nxlock inside the job then
// fails loudly on authentication rather than quietly using another backend.
std::vector<EnvSetting> child_environment(const lock::Lockable& lock,
                                                       const HeldLock& held,
                                                       const RunOptions& options) {
  std::vector<EnvSetting> settings = {
      {"NXLOCK_KEY", lock.key()},
      {"NXLOCK_VALUE", held.value},
      // None issued (a quorum): never an outer job's token.
      {"NXLOCK_FENCE",
       lock.fence() > 0 ? std::optional(std::to_string(lock.fence())) : std::nullopt},
      // --slots: which slot the job holds; never an outer job's.
      {"NXLOCK_SLOT", lock.slot() > 0 ? std::optional(std::to_string(lock.slot())) : std::nullopt},
  };
  for (auto& [name, value] : lock.job_environment()) {
    settings.push_back({std::move(name), std::move(value)});
  }
  if (options.inherit_credentials) {
    return settings;
  }
  // NXLOCK_PING_URL: a checker's URL is its credential (a ping on it is a run's report).
  for (const char* name :
       {"NXLOCK_PASSWORD", "REDISCLI_AUTH", "NXLOCK_SENTINEL_PASSWORD", "NXLOCK_PING_URL"}) {
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

Job start_job(LockedRun& run) {
  if (util::mono_now() >= run.act_by()) {
    // The backend answered so late that the lock may have expired already.
    throw util::Error(util::ErrorKind::unavailable, "lock '" + util::escape(run.lock.key()) + "'",
                      "acquired too late to be sure it is still held; the job was not started");
  }
  if (!run.watchdog.prepared()) {
    run.watchdog.prepare(run.options.command, run.signals.original_mask());
  }
  Job job;
  JobWatchdog::Go go;
  go.environment = child_environment(run.lock, run.held, run.options);
  go.take_terminal = job.terminal.active();
  go.schedule = run.schedule;
  go.deadline = run.held.valid_until;
  // If we die, the job is stopped as on a lost lock, then the lock released as
  // we would (--hold kept): the watchdog needs the take and the values.
  go.death_grace = run.options.on_lost == OnLost::kill ? util::Micros(0) : run.options.kill_after;
  go.take.fence = run.lock.fence();
  go.take.ttl = run.options.ttl;
  if (run.options.hold > util::Micros(0)) {
    go.take.hold_until = run.options.acquired_at + run.options.hold;
  }
  go.values = release_values(run.lock, run.held);
  // The details are advisory, and the job need not wait for them, nor for the
  // host name and /proc they are read from: written while the watchdog starts
  // the job, so that neither waits for the other (BENCHMARKS.md, "Where the
  // time goes"). A job whose exec fails is released at once, and they with it.
  const auto record_holder = [&run]() noexcept {
    try {
      lock::Holder holder = lock::describe_holder(
          run.held.value, getpid(), run.options.holder_command,
          util::whole_seconds(run.options.acquired_at), run.watchdog.pid());
      holder.replaceable = run.askable();
      run.lock.record_holder(std::move(holder));
    } catch (...) {
      // Advisory: a job running without its details beats one stopped for them.
    }
  };
  const auto started = run.watchdog.start(go, record_holder);
  if (started.exec_error != 0) {
    run.watchdog.disarm();  // nothing to watch: the job exited at once
    job.exec_error = started.exec_error;
    return job;
  }
  job.pid = started.pid;
  job.terminal.give(job.pid);
  return job;
}

}  // namespace nxlock::run
