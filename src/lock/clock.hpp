// Clock: where "now" comes from in every lock decision (server TIME, or this host's clock).
#pragma once

#include <optional>

#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock {

class Clock {
 public:
  virtual ~Clock() = default;
  // Unix time in microseconds.
  virtual util::Micros now() = 0;
};

// The caller's own real-time clock (the SETNX page's original behaviour).
class LocalClock final : public Clock {
 public:
  util::Micros now() override { return util::wall_now(); }
};

// The backend's clock: Redis TIME, so hosts with skewed clocks agree. Read once
// and carried forward on the monotonic clock, read again every `k_resync`: a
// waiter woken by a release goes straight to SETNX, without a round trip for
// the time. The carried reading is off by half a round trip at most, plus the
// drift of two clocks over seconds; expiry is decided to the second.
class StoreClock final : public Clock {
 public:
  static constexpr util::Micros k_resync{10'000'000};

  explicit StoreClock(store::Store& store) : m_store(store) {}
  util::Micros now() override {
    const util::Micros mono = util::mono_now();
    if (!m_read_at || mono - *m_read_at >= k_resync) {
      m_reading = m_store.now();
      const util::Micros after = util::mono_now();
      m_read_at = mono + (after - mono) / 2;  // the server read its clock mid-way
      return m_reading + (after - *m_read_at);
    }
    return m_reading + (mono - *m_read_at);
  }

 private:
  store::Store& m_store;
  util::Micros m_reading{0};              // the store's clock...
  std::optional<util::Micros> m_read_at;  // ...at this monotonic time (none yet)
};

}  // namespace nxlock::lock
