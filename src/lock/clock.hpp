// Clock: where "now" comes from in every lock decision (server TIME, or this host's clock).
#pragma once

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

// The backend's clock: Redis TIME, so hosts with skewed clocks agree.
class StoreClock final : public Clock {
 public:
  explicit StoreClock(store::Store& store) : m_store(store) {}
  util::Micros now() override { return m_store.now(); }

 private:
  store::Store& m_store;
};

}  // namespace nxlock::lock
