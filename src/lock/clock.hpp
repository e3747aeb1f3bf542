// Clock: where "now" comes from in every lock decision (server TIME, or this host's clock).
#pragma once

#include <memory>
#include <optional>

#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock {

class Clock {
 public:
  virtual ~Clock() = default;
  // Unix time in microseconds.
  virtual util::Micros now() = 0;
  // How far the clock now() follows may be ahead of now()'s reading (it never
  // runs ahead of it): a value computed from now() may be that much short.
  virtual util::Micros lag() const { return util::Micros(0); }
  // Whether now() follows the lock's store's own clock (StoreClock): a step
  // may then decide with that clock at its own instant (store::StepPolicy::own_clock).
  virtual bool is_store_clock() const { return false; }
};

// The caller's own real-time clock (the SETNX page's original behaviour).
class LocalClock final : public Clock {
 public:
  util::Micros now() override { return util::wall_now(); }
};

// The backend's clock: Redis TIME, so hosts with skewed clocks agree. Read once
// and carried forward on the monotonic clock, read again every `k_resync`: a
// waiter woken by a release goes straight to SETNX, without a round trip for
// the time. The server read its clock somewhere within the exchange; the
// reading is taken to belong to the exchange's end, so the carried estimate
// can only run late (by up to the exchange's duration, lag()), never ahead:
// an estimate ahead of the server could call a live lock expired. A reading
// whose exchange took longer than k_max_carried_lag serves one decision and
// is read again for the next, so values written from it are not carried short.
// The store also decides takeovers with its own clock at that instant
// (store::StepPolicy::own_clock).
class StoreClock final : public Clock {
 public:
  static constexpr util::Micros k_resync{10'000'000};
  static constexpr util::Micros k_max_carried_lag{250'000};

  explicit StoreClock(store::Store& store) : m_store(store) {}
  util::Micros now() override {
    const util::Micros mono = util::mono_now();
    if (!m_read_at || mono - *m_read_at >= k_resync || m_lag > k_max_carried_lag) {
      m_reading = m_store.now();
      m_read_at = util::mono_now();
      m_lag = *m_read_at - mono;
      return m_reading;
    }
    return m_reading + (mono - *m_read_at);
  }
  util::Micros lag() const override { return m_lag; }
  bool is_store_clock() const override { return true; }

 private:
  store::Store& m_store;
  util::Micros m_reading{0};              // the store's clock...
  std::optional<util::Micros> m_read_at;  // ...at this monotonic time at the latest (none yet)
  util::Micros m_lag{0};                  // the exchange that read it took this long
};

// The clock lock decisions on `store` use: the store's own, or this host's
// when `local` (--clock local).
inline std::unique_ptr<Clock> clock_of(store::Store& store, bool local) {
  if (local) {
    return std::make_unique<LocalClock>();
  }
  return std::make_unique<StoreClock>(store);
}

}  // namespace nxlock::lock
