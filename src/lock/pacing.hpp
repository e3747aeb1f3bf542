// How a waiter paces itself between looks, for one server (Lock) and a quorum
// (QuorumLock) alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "util/random.hpp"
#include "util/time.hpp"

namespace nxlock::lock::pacing {

using util::Micros;

// Waiters also poll, for holders that never signal (other clients of the
// documented pattern, a DEL from redis-cli). Jitter spreads the herd.
constexpr Micros k_poll_min{100'000};
constexpr Micros k_poll_max{300'000};
// Queued waiters behind another one look (and renew their lease) this often:
// slower than the first waiter's poll, since they cannot take the lock anyway,
// and their cost grows with their number.
constexpr Micros k_queue_tick_min{250'000};
constexpr Micros k_queue_tick_max{400'000};
// Farther back than k_queue_near, a waiter looks less often in proportion to
// the waiters ahead of it (each must take the lock and release it first), up
// to k_queue_far_max: the server's work per handoff then stays flat as the
// line grows. The release hands the first its turn and cuts its lease
// (WaitersQueue::k_turn_lease), so only the few nearest the front watch it.
constexpr std::int64_t k_queue_near = 8;
constexpr Micros k_queue_per_ahead{40'000};
constexpr Micros k_queue_far_max{30'000'000};
// Wake a hair after the expiry second begins, so the holder's value is
// already older than now when we look.
constexpr Micros k_expiry_slack{2'000};
// A progress display (the terminal status line) is refreshed this often.
constexpr Micros k_progress_interval{1'000'000};
// Lock values from here on are beyond any wait: their expiry in microseconds
// would not fit in 64 bits (a value may have 18 digits).
constexpr std::int64_t k_far_seconds = std::numeric_limits<std::int64_t>::max() / 1'000'000 - 1;

inline Micros jittered_poll() {
  return util::random_between(k_poll_min, k_poll_max);
}

// How much longer than a tick a waiter with `ahead` waiters before it may go
// without a look (0 near the front). Never decreasing as `ahead` grows.
inline Micros queue_slowdown(std::int64_t ahead) {
  if (ahead < k_queue_near) {
    return Micros(0);
  }
  return std::min(k_queue_far_max, k_queue_per_ahead * ahead);
}

// The wait of a queued waiter behind another, with `ahead` waiters before it.
inline Micros jittered_queue_tick(std::int64_t ahead = 0) {
  const Micros slowdown = queue_slowdown(ahead);
  if (slowdown == Micros(0)) {
    return util::random_between(k_queue_tick_min, k_queue_tick_max);
  }
  return util::random_between(slowdown * 3 / 4, slowdown);
}

// How long to sleep before looking again at a lock held until the whole second
// `held_until`, with the clock saying `now`: until just past its expiry or the
// next poll tick, whichever comes first, and never less than the slack,
// whatever the value and the clock say.
inline Micros until_next_look(std::int64_t held_until, Micros now) {
  const Micros tick = jittered_poll();
  if (held_until >= k_far_seconds) {
    return tick;  // beyond any tick: the tick decides
  }
  const Micros until_expiry = Micros((held_until + 1) * 1'000'000) - now + k_expiry_slack;
  return std::min(tick, std::max(until_expiry, k_expiry_slack));
}

}  // namespace nxlock::lock::pacing
