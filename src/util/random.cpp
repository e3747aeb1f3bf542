// random_u64: getrandom(2), or the clock and the pid where it cannot answer at once.
#include "util/random.hpp"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <random>

namespace nxlock::util {

std::uint64_t random_u64() {
  std::uint64_t value = 0;
  if (getrandom(&value, sizeof value, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof value)) {
    return value;
  }
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  // splitmix64's finaliser: nearby inputs give unrelated outputs.
  value = static_cast<std::uint64_t>(now.tv_nsec) ^ (static_cast<std::uint64_t>(now.tv_sec) << 30) ^
          (static_cast<std::uint64_t>(getpid()) << 48);
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

std::chrono::microseconds random_between(std::chrono::microseconds low,
                                         std::chrono::microseconds high) {
  static thread_local std::minstd_rand rng{static_cast<std::uint_fast32_t>(random_u64())};
  std::uniform_int_distribution<std::int64_t> dist(low.count(), high.count());
  return std::chrono::microseconds(dist(rng));
}

}  // namespace nxlock::util
