// The bounds of the options' values (option_table.cpp), free of CLI11.
#pragma once

#include <cstdint>

namespace nxlock::cli {

// Durations (--wait, --timeout, --kill-after) are at most this many seconds
// (about 11 days): every deadline and poll timeout then fits its type.
inline constexpr double k_max_duration_seconds = 1e6;
// A ttl (whole seconds) has the same bound, so every lock a user can ask for
// fits the durations the lock and the watchdog compute from it.
inline constexpr std::int64_t k_max_ttl = 1'000'000;
// --replicas: far more than any deployment has, small enough to say in a message.
inline constexpr int k_max_replicas = 1000;
// Below a millisecond a socket timeout rounds to zero, which means "none".
inline constexpr double k_min_timeout_seconds = 0.001;

// --max-waiters: far more waiters than any line holds.
inline constexpr int k_max_waiters = 1'000'000;

// --json-fd: a descriptor number (the kernel's own bound is far lower).
inline constexpr int k_max_descriptor = 1'000'000;

}  // namespace nxlock::cli
