// QuorumLock::acquire: rounds until a majority holds the lock, waiting between
// them on every server's watch (the one wait loop, wait_loop.hpp).
#include <optional>
#include <vector>

#include "lock/quorum/quorum.hpp"
#include "lock/quorum/quorum_fanout.hpp"
#include "lock/quorum/quorum_watch.hpp"
#include "lock/wait_loop.hpp"
#include "util/random.hpp"

namespace nxlock::lock {

namespace {

using util::Error;
using util::Micros;

// Two clients that split the servers between them both undo and try again; a
// random pause first lets one of them get there before the other.
constexpr Micros k_split_pause_min{5'000};
constexpr Micros k_split_pause_max{60'000};
// A split is no holder: even -n tries again this many times.
constexpr int k_split_retries = 3;

}  // namespace

AcquireResult QuorumLock::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  const std::size_t n = m_channels.size();
  detail::QuorumWatches watches(m_channels);
  QuorumRound round;
  int splits = 0;

  WaitSteps steps;
  steps.look = [&] {
    round = try_round(ttl);
    Look look;
    if (round.acquired) {
      look.found = Look::Found::acquired;
      look.taken.outcome = AcquireResult::Outcome::acquired;
      look.taken.value = round.value;
      look.taken.now_seconds = round.now_seconds;
      // Held at least until valid_from + ttl, as every client's clock sees it.
      look.taken.valid_from = round.started - drift_margin(ttl);
      look.taken.fence = round.fence;
      return look;
    }
    if (round.answered < majority_of(n)) {
      // As on one server: once waiting, servers that fail for a while are
      // waited out until the wait's end; a first attempt that fails says so at once.
      std::vector<std::optional<Error>> errors;
      for (const auto& server : round.servers) {
        errors.push_back(server.error);
      }
      throw no_majority(round.answered, errors);
    }
    look.held_until = round.held_until;
    look.now_seconds = round.now_seconds;
    // Wake at the earliest expiry a busy server reported, a release, or a poll tick.
    if (round.first_expiry > 0) {
      look.wake_at = round.first_expiry;
    }
    // A split: we took some servers, and no other holder has a majority either
    // (another taker did the same), or we took a majority too late.
    if (round.acquired_on > 0 && round.held_on < majority_of(n)) {
      // Two takers split the servers and both undid theirs: neither holds it.
      // Not woken by each other's undo: a random pause, then look again.
      look.found = Look::Found::pause;
      look.pause = util::random_between(k_split_pause_min, k_split_pause_max);
      look.pause_when_late = splits < k_split_retries;
      ++splits;
    }
    return look;
  };
  steps.arm = [&] {
    // A watch on every server that answered (again, where one was dropped).
    std::vector<bool> answered(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      answered[i] = round.servers[i].attempt.has_value();
    }
    return watches.arm(answered, m_deadline);
  };
  steps.wait = [&](Micros timeout, int interrupt_fd, const Look*) {
    return watches.wait(timeout, interrupt_fd);
  };
  return wait_for_lock(policy, m_clock, steps);
}

}  // namespace nxlock::lock
