// Retrying a release through backend failures: the back-off, and the loop, for
// run-locked's release at the end and for its watchdog's when nxlock died.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lock/lock.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// While the backend fails, renewal and the release retry after a jittered
// back-off that starts short (a restart or a dropped idle connection heals in
// milliseconds) and grows to a cap.
inline constexpr util::Micros k_backoff_first{50'000};
inline constexpr util::Micros k_backoff_cap{500'000};

// Releases one value: lock.release, or, under --hold, a release_after.
using ReleaseStep = std::function<lock::Verdict(const std::string& value)>;

// Releases `value`, or one a renewal may have written (`maybe_ours`), with
// `release_one`, retrying backend failures with short back-off while the lock
// is still valid (`valid_until`, monotonic), for a few seconds at most: past
// that it is left to expire at its timestamp. Throws the last util::Error if
// no attempt got an answer.
lock::Verdict release_with_retries(const std::string& value,
                                   const std::vector<std::string>& maybe_ours,
                                   util::Micros valid_until, const ReleaseStep& release_one);

}  // namespace nxlock::run
