// The watchdog process's entry point: JobWatchdog::prepare() forks into it.
#pragma once

#include <signal.h>

#include "run/watchdog_release.hpp"

namespace nxlock::run {

// Runs the watchdog in a fork of ours (see JobWatchdog): waits on `control`
// for the go, then starts the job (`argv`, with `child_mask` as its signal
// mask), reports on `report` and watches until it is done; if nxlock dies,
// stops the job and releases the lock with `release` (none: left to its ttl).
// Never returns.
[[noreturn]] void run_watchdog(int control, int report, char* const* argv,
                               const sigset_t& child_mask,
                               const ReleaseForNxlock& release);

}  // namespace nxlock::run
