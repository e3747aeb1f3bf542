// Wall-clock and monotonic time helpers.
#include "util/time.hpp"

#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdio>

namespace nxlock::util {

namespace {
Micros read_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return Micros(static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000);
}
}  // namespace

Micros wall_now() {
  return read_clock(CLOCK_REALTIME);
}

Micros mono_now() {
  return read_clock(CLOCK_MONOTONIC);
}

int poll_timeout_ms(Micros duration) {
  if (duration <= Micros(0)) {
    return 0;
  }
  const std::int64_t us = duration.count();
  const std::int64_t ms = us / 1000 + (us % 1000 != 0 ? 1 : 0);  // no overflow near the max
  return static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
}

std::string decimal_seconds(Micros duration) {
  char text[40];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(duration.count()) / 1e6);
  std::string out = text;
  out.erase(out.find_last_not_of('0') + 1);  // "%.3f" always has a point
  if (out.back() == '.') {
    out.pop_back();
  }
  return out;
}

std::string format_local_time(std::int64_t unix_seconds) {
  // Past the year 9999 a date reads as nonsense, and far enough out localtime_r
  // fails and leaves day 0 of 1900 (a lock value may have 18 digits).
  const time_t t = static_cast<time_t>(unix_seconds);
  tm local{};
  if (localtime_r(&t, &local) == nullptr || local.tm_year > 9999 - 1900) {
    return "beyond the year 9999";
  }
  char buffer[64];
  const size_t n = strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S %Z", &local);
  return std::string(buffer, n);
}

}  // namespace nxlock::util
