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

// Starts the child (own process group, parent-death signal, NXLOCK_KEY/NXLOCK_VALUE
// in its environment, our original signal mask), records `options.holder` beside
// the lock, and supervises the child until it ends.
// `value` is the lock value we hold; it is updated as the lock is renewed.
// Does not release the lock: the caller does, in every case.
RunOutcome supervise(lock::Lock& lock, std::string& value, const RunOptions& options,
                     SignalChannel& signals, const Warn& warn);

// Waits for the watchdog process supervise() leaves behind: told the job is
// over, it exits on its own, so the caller releases the lock first and calls
// this after, before it exits (an orphaned zombie is never reaped where PID 1
// does not reap, as in many containers).
void wait_for_watchdog();

}  // namespace nxlock::run
