// Supervisor: runs the child of run-locked while its lock is held, renews the lock,
// forwards signals, reacts to a lost lock, and reports how the child ended.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/lock.hpp"
#include "run/signals.hpp"
#include "util/time.hpp"

namespace nxlock::run {

enum class OnLost { term, kill, ignore };

struct RunOptions {
  std::vector<std::string> command;   // argv of the child; command[0] looked up in PATH
  std::int64_t ttl = 60;              // seconds, as the lock was taken with
  bool renew = true;                  // keep the lock while the child runs
  OnLost on_lost = OnLost::term;
  util::Micros kill_after{10'000'000};
  lock::Holder holder;                // recorded beside the lock once the child runs
};

struct RunOutcome {
  enum class Ending {
    exited,          // `status` is the child's exit status
    signaled,        // `status` is 128 + the signal that killed it
    not_found,       // command[0] was not found (127)
    not_executable,  // command[0] could not be executed (126)
  };
  Ending ending = Ending::exited;
  int status = 0;
  bool lost = false;    // the lock was lost while the child ran
  std::string detail;   // strerror for not_found / not_executable
};

// Reports progress a user should see (lost lock, renew trouble); the CLI prints it.
using Warn = std::function<void(std::string_view)>;

// The lock run-locked holds, as acquisition and renewal leave it.
struct HeldLock {
  std::string value;            // the lock value we hold
  util::Micros valid_until{0};  // monotonic: the lock cannot expire before this
  // Values a renewal may have written although its reply was lost (the
  // connection broke mid-command): the key holding one of them is still ours.
  std::vector<std::string> maybe_ours;
};

// Starts the child (own process group, parent-death signal, NXLOCK_KEY/NXLOCK_VALUE
// in its environment, our original signal mask), records `options.holder` beside
// the lock, and supervises the child until it ends, renewing `held` as it goes.
// Backend failures are retried while the lock is still valid; a lock that could
// have expired without a renewal confirmed is lost. Throws util::Error
// (unavailable) without starting the child if `held` is no longer valid.
// Does not release the lock: the caller does, in every case (release_held).
RunOutcome supervise(lock::Lock& lock, HeldLock& held, const RunOptions& options,
                     SignalChannel& signals, const Warn& warn);

// Releases `held` (compare-and-delete of its value), retrying backend failures
// with short back-off while the lock is still valid, for at most a few seconds:
// past that it is left to expire at its timestamp. Throws the last util::Error
// if no attempt got an answer.
// `release_one` releases one value (default: lock.release); --hold passes one
// that keeps the lock until the hold's end instead.
using ReleaseStep = std::function<lock::Verdict(const std::string& value)>;
lock::Verdict release_held(lock::Lock& lock, HeldLock& held, const ReleaseStep& release_one = {});

// Waits for the watchdog process supervise() leaves behind: told the job is
// over, it exits on its own, so the caller releases the lock first and calls
// this after, before it exits (an orphaned zombie is never reaped where PID 1
// does not reap, as in many containers).
void wait_for_watchdog();

}  // namespace nxlock::run
