// Renewal: keeps run-locked's lock while its job runs, riding out a failing backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "run/run_options.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// Keeps the lock while the job runs: renews every ttl/3, and rides out a
// backend that fails for a while (a restart, a failover, an idle-client
// timeout) by retrying until the job must be stopped for the lock to be
// gone before it could expire (`lead` before that: the schedule's grace and
// kill margin). Every attempt's deadline is that moment, so no decision rests
// on a reply that came after it, and a lost lock is acted on within one
// renewal interval, whatever --io-timeout is.
class Renewal {
 public:
  // `before_write` hears each renewal's value before the renewal writes it
  // (none: nobody needs to).
  Renewal(lock::Lockable& lock, HeldLock& held, std::int64_t ttl, util::Micros lead,
          const Reporter& reporter,
          std::function<void(const std::string& planned)> before_write = {});

  // When step() next has something to do (monotonic).
  util::Micros next_at() const { return m_next; }

  // Makes the next renewal due now (the lock may have been lost: loss_news()).
  void hurry() { m_next = std::min(m_next, util::mono_now()); }

  // Renews if it is due, updating the held lock. Returns why the lock is
  // lost, if it is.
  std::optional<Loss> step();

 private:
  lock::Lockable& m_lock;
  HeldLock& m_held;
  util::Micros m_ttl;
  util::Micros m_interval;
  util::Micros m_lead;  // how long before the lock's validity ends the job must be stopped
  util::Micros m_next;
  util::Micros m_backoff;
  std::optional<util::Micros> m_trouble_since;  // when the current run of failures began
  const Reporter& m_reporter;
  std::function<void(const std::string& planned)> m_before_write;
};

}  // namespace nxlock::run
