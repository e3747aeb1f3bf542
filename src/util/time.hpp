// Wall-clock and monotonic time helpers in microseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace nxlock::util {

using Micros = std::chrono::microseconds;

// Microseconds since the Unix epoch, from the system's real-time clock.
Micros wall_now();

// Microseconds on CLOCK_MONOTONIC: for deadlines, never for lock values.
Micros mono_now();

// Whole seconds of a Unix time, rounding toward negative infinity.
inline std::int64_t whole_seconds(Micros t) {
  return std::chrono::floor<std::chrono::seconds>(t).count();
}

// The real-time clock's whole seconds since the Unix epoch.
inline std::int64_t wall_seconds() {
  return whole_seconds(wall_now());
}

// Milliseconds for poll() to wait `duration`: rounded up, so that a wait never
// wakes a little before its deadline and spins; 0 for a duration already past;
// at most INT_MAX.
int poll_timeout_ms(Micros duration);

// A duration in seconds as a user writes it: "2", "0.3", "1.25" (at most
// milliseconds); seconds_text adds the unit: "0.3s".
std::string decimal_seconds(Micros duration);
inline std::string seconds_text(Micros duration) {
  return decimal_seconds(duration) + 's';
}

// "2026-11-22 07:40:11 UTC"-style local rendering of a Unix time in seconds;
// "beyond the year 9999" for later times.
std::string format_local_time(std::int64_t unix_seconds);

}  // namespace nxlock::util
