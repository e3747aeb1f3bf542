// The watchdog's release of the lock of an nxlock that died: what it needs, and the step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lock/lockable.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// What nxlock's take was, for a release made in its place.
struct TakenHold {
  std::int64_t fence = 0;      // the take's token; 0: none
  std::int64_t ttl = 0;        // seconds
  util::Micros hold_until{0};  // --hold: kept until then (the lock's clock); zero: none
};

// Releases the hold `value` (as `unlock` takes it) of `take` by a connection of
// its own, nxlock's having gone with it; throws util::Error when no answer came.
using ReleaseForNxlock =
    std::function<lock::Verdict(const std::string& value, const TakenHold& take)>;

// The watchdog's release for an nxlock that died, the job gone: each of
// `values` in turn (the likeliest first), through backend failures while the
// lock lasts (`valid_until`, monotonic), for a few seconds at most. Best effort:
// what is not released expires at its ttl.
void release_for_nxlock(const ReleaseForNxlock& release, const std::vector<std::string>& values,
                        const TakenHold& take, util::Micros valid_until);

}  // namespace nxlock::run
