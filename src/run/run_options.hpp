// What run_locked() is given and gives back: the job's options, the held
// lock, how the job ended, and the reporter that tells the CLI as it goes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lock/lockable.hpp"
#include "lock/replace_request.hpp"
#include "util/time.hpp"

namespace nxlock::run {

enum class OnLost { term, kill, ignore };

struct RunOptions {
  std::vector<std::string> command;  // argv of the child; command[0] looked up in PATH
  std::int64_t ttl = 60;             // seconds, as the lock was taken with
  bool renew = true;                 // keep the lock while the child runs
  OnLost on_lost = OnLost::term;
  util::Micros kill_after{10'000'000};
  // --max-runtime: the job is stopped (SIGTERM, kill_after, SIGKILL, all of it)
  // this long after it started; none: it may run as long as it holds the lock.
  std::optional<util::Micros> max_runtime;
  // Leave NXLOCK_PASSWORD, REDISCLI_AUTH and a password in NXLOCK_URL to the child.
  bool inherit_credentials = false;
  // --hold: a job that ran keeps the lock until `acquired_at + hold` (the lock's
  // clock); zero releases at once.
  util::Micros hold{0};
  util::Micros acquired_at{0};
  // The job's command line as the holder's details show it (passwords
  // redacted); the details are recorded beside the lock once the job runs.
  std::string holder_command;
};

// The lock run-locked holds, as acquisition and renewal leave it.
struct HeldLock {
  std::string value;            // the lock value we hold
  util::Micros valid_until{0};  // monotonic: the lock cannot expire before this
  // Values a renewal may have written although its reply was lost (the
  // connection broke mid-command): the key holding one of them is still ours.
  std::vector<std::string> maybe_ours;
};

// How the child ended.
struct RunOutcome {
  enum class Ending {
    exited,          // `status` is the child's exit status
    signaled,        // `status` is 128 + the signal that killed it
    not_found,       // command[0] was not found (127)
    not_executable,  // command[0] could not be executed (126)
  };
  Ending ending = Ending::exited;
  int status = 0;
  bool lost = false;       // the lock was lost while the child ran
  bool timed_out = false;  // it ran past --max-runtime and was stopped
  bool replaced = false;   // a run-locked --replace asked for the lock: it was stopped
  std::string replaced_by;  // replaced: who asked ("pid 123 on host")
  std::string detail;      // strerror for not_found / not_executable

  // The job's process ran (exited or was killed), as opposed to never starting.
  bool ran() const { return ending == Ending::exited || ending == Ending::signaled; }
};

// A lost lock, as supervision found it: by the store's verdict on our value
// (taken over, deleted, expired), or without one, for the reason in `detail`.
struct Loss {
  Loss(std::optional<lock::Verdict> why, std::string more)
      : verdict(why), detail(std::move(more)) {}

  std::optional<lock::Verdict> verdict;
  std::string detail;
  // The watchdog began stopping the job by itself: we did not run in time.
  bool by_watchdog = false;
  // --on-lost term: the grace SIGTERM got, where --kill-after was cut short
  // for the job to be gone before the lock could expire.
  std::optional<util::Micros> grace_cut_to;
};

// What a user should see while the job runs; the CLI words and prints it.
struct Reporter {
  std::function<void(std::string_view)> warn;     // renewal trouble, and its end
  std::function<void(const Loss&, OnLost)> lost;  // told before the job is stopped
  // --max-runtime came: told before the job is stopped, with the grace SIGTERM gets.
  std::function<void(util::Micros)> timed_out;
  // The job's process has started (not told when it could not be executed):
  // what runs beside the job, never before it (--ping's start, the metrics'
  // gauge of runs now).
  std::function<void()> started;
  // A run-locked --replace asked for the lock (`by`: who): told before the
  // job is stopped, with the grace SIGTERM gets (zero: SIGKILL at once).
  std::function<void(const std::string& by, util::Micros grace)> replaced;
};

struct RunLockedOutcome {
  RunOutcome job;
  // The release at the end, not tried when the lock was lost: the store's
  // verdict, or, when no attempt got an answer, why (the lock then expires).
  std::optional<lock::Verdict> released;
  std::string release_error;
  std::string kept_value;  // --hold: the value that keeps the lock until the hold ends
};

}  // namespace nxlock::run
