// Random numbers for jitter and for waiters' tickets: unpredictable enough to
// keep clients apart, not for secrets.
#pragma once

#include <chrono>
#include <cstdint>

namespace nxlock::util {

// 64 random bits from getrandom(2). Not std::random_device: constructing one probes
// the CPU (cpuid, a VM exit under a hypervisor), many times the system call's cost
// on every lock taken (BENCHMARKS.md, "getrandom, not std::random_device"). Where
// the kernel's pool is not ready yet (early boot), the clock and the pid are mixed
// instead.
std::uint64_t random_u64();

// A uniformly random duration in [low, high].
std::chrono::microseconds random_between(std::chrono::microseconds low,
                                         std::chrono::microseconds high);

// A uniformly jittered duration in [base/2, base]: retries of many clients spread out.
inline std::chrono::microseconds jittered(std::chrono::microseconds base) {
  return random_between(base / 2, base);
}

}  // namespace nxlock::util
