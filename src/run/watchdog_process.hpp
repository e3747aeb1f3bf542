// The watchdog process's entry point: JobWatchdog::prepare() forks into it.
#pragma once

#include <signal.h>

#include "run/watchdog.hpp"

namespace nxlock::run {

// Runs the watchdog in a fork of ours (see JobWatchdog): waits on `control`
// for the go, then starts the job (`argv`, with `child_mask` as its signal
// mask), reports on `report` and watches until it is done; if nxlock dies,
// stops the job and releases the lock with `release` (none: left to its ttl).
// Never returns.
[[noreturn]] void run_watchdog(int control, int report, char* const* argv,
                               const sigset_t& child_mask,
                               const JobWatchdog::ReleaseForNxlock& release);

// The watchdog's release for an nxlock that died, the job gone: each of
// `values` in turn (the likeliest first), through backend failures while the
// lock lasts (`valid_until`, monotonic), for a few seconds at most. Best effort:
// what is not released expires at its ttl.
void release_for_nxlock(const JobWatchdog::ReleaseForNxlock& release,
                        const std::vector<std::string>& values, const JobWatchdog::Take& take,
                        util::Micros valid_until);

}  // namespace nxlock::run
