// QuorumLock's round: the documented steps on every server at once, the
// quorum's fencing token, and the undoing of a round that did not hold.
#include <algorithm>
#include <map>

#include "lock/quorum/quorum.hpp"
#include "lock/quorum/quorum_fanout.hpp"
#include "store/keys.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using namespace detail;  // the fan-out: ask(), Decision, Replies (quorum_fanout.hpp)
using util::Micros;

// A key deleted between SETNX and GET is tried again at once, this often per round.
constexpr int k_tries_per_round = 3;

std::string millis_text(Micros duration) {
  return std::to_string(duration.count() / 1000) + "." +
         std::to_string(duration.count() % 1000 / 100) + " ms";
}

}  // namespace

void QuorumLock::undo(const std::string& value, const std::vector<bool>& keep,
                      bool under_token_only) {
  // Best effort, and briefly: a server that did not answer the steps will not
  // answer this either, and our value expires there on its own. Queued behind
  // the step it undoes on each server, so it runs after it even there.
  const Micros bound = util::mono_now() + detail::k_best_effort_patience;
  std::vector<bool> involved(keep.size());
  for (std::size_t i = 0; i < keep.size(); ++i) {
    involved[i] = !keep[i];
  }
  const std::string key = m_key;
  const auto replies = ask<bool>(
      m_channels,
      [value, key, under_token_only](QuorumChannel& channel) {
        if (!channel.store) {
          return false;
        }
        // Under our token there, where we took one: two takers in the same
        // second write the same value, and an unguarded delete of ours would
        // take the other's lock from under it.
        const std::int64_t token = channel.open().fence();
        if (token == 0 && under_token_only) {
          return false;  // an acquisition's round: a server where we hold no token holds none of ours
        }
        const std::string counter = store::fence_key(key);
        const bool deleted = channel.store->compare_and_delete(
            key, value,
            token == 0 ? std::nullopt : std::optional(store::Fence{counter, token}));
        if (deleted && util::tracing()) {
          util::trace("quorum: undone on " + channel.spec.name + ": DEL-IF-EQUAL " + key + " " +
                      value);
        }
        return deleted;
      },
      [](const Replies<bool>&) { return Decision::open; },
      m_deadline ? std::min(*m_deadline, bound) : bound, involved, bound);
  for (const auto& error : replies.errors) {
    if (error) {
      // Best effort: our value expires on its own there.
      util::trace(std::string("quorum: not undone: ") + error->what());
    }
  }
}

QuorumRound QuorumLock::try_round(std::int64_t ttl) {
  const std::size_t n = m_channels.size();
  const std::size_t majority = majority_of(n);
  QuorumRound round;
  round.started = util::mono_now();
  const Micros reading = m_clock.now();
  round.now_seconds = util::whole_seconds(reading);
  round.value = std::to_string(expiry_for(round.now_seconds, ttl));
  round.servers.assign(n, {});

  // No reply that comes after the validity window may count, so none is waited for.
  const Micros window_end = validity_end(round.started, ttl);
  // Decided once a majority took it, or once too few are left to make one.
  const auto replies = ask<Attempt>(
      m_channels,
      [reading, ttl](QuorumChannel& channel) {
        // Every server's Lock reads the same frozen reading: the same value everywhere.
        channel.clock.set(reading);
        Lock& lock = channel.open();
        Attempt attempt;
        for (int tries = 0; tries < k_tries_per_round; ++tries) {
          attempt = lock.try_once(ttl);
          if (attempt.outcome != Attempt::Outcome::retry) {
            break;
          }
        }
        return attempt;
      },
      [majority](const Replies<Attempt>& so_far) {
        std::size_t took = 0;
        for (const auto& attempt : so_far.values) {
          took += attempt && attempt->outcome == Attempt::Outcome::acquired ? 1 : 0;
        }
        // Lost, and whether busy (a majority answered) or unavailable (too few
        // can) is known too: a slow server is not taken for a dead one.
        const bool lost = took + so_far.pending < majority;
        const bool known =
            so_far.answered >= majority || so_far.answered + so_far.pending < majority;
        return took >= majority ? Decision::done_now
               : lost && known  ? Decision::done_after_grace
                                : Decision::open;
      },
      m_deadline ? std::min(*m_deadline, window_end) : window_end, everyone());
  round.ended = util::mono_now();
  const auto& errors = replies.errors;

  const util::Error* hard_error = nullptr;
  // A server holding what is not a lock cannot be taken, but a majority without
  // it can: only when none is reached is it the answer (as status has it).
  const util::Error* foreign_error = nullptr;
  std::vector<bool> keep(n, false);
  std::map<std::int64_t, std::size_t> busy_counts;
  for (std::size_t i = 0; i < n; ++i) {
    if (errors[i]) {
      round.servers[i].error = errors[i];
      const util::ErrorKind kind = errors[i]->kind();
      if (kind == util::ErrorKind::data) {
        foreign_error = foreign_error ? foreign_error : &*errors[i];
      } else if (!hard_error && kind != util::ErrorKind::unavailable) {
        hard_error = &*errors[i];
      }
      continue;
    }
    ++round.answered;
    round.servers[i].attempt = replies.values[i];
    const Attempt& attempt = *round.servers[i].attempt;
    if (attempt.outcome == Attempt::Outcome::acquired) {
      ++round.acquired_on;
      continue;
    }
    keep[i] = true;  // nothing of ours was written there
    if (attempt.outcome == Attempt::Outcome::busy) {
      ++busy_counts[attempt.held_until];
      round.first_expiry = round.first_expiry == 0
                               ? attempt.held_until
                               : std::min(round.first_expiry, attempt.held_until);
    }
  }
  // The holder's value is the one most busy servers report (the later one on a tie).
  std::size_t most = 0;
  for (const auto& [held_until, count] : busy_counts) {
    if (count >= most) {
      most = count;
      round.held_until = held_until;
      round.held_on = count;
    }
  }
  round.acquired =
      !hard_error && quorum_holds(round.acquired_on, n, round.started, round.ended, ttl);
  if (round.acquired) {
    std::vector<bool> took(n);
    for (std::size_t i = 0; i < n; ++i) {
      took[i] = !keep[i] && !errors[i];
    }
    round.acquired = raise_fences(round, took, ttl);
  }
  if (util::tracing()) {
    util::trace("quorum: " + round.value + " acquired on " + std::to_string(round.acquired_on) +
                " of " + std::to_string(n) + " (" + std::to_string(round.answered) +
                " answered, majority " + std::to_string(majority_of(n)) + ") in " +
                millis_text(round.ended - round.started) +
                (round.acquired ? ", fence " + std::to_string(round.fence) + " on " +
                                      std::to_string(round.fenced_on) + ", valid for " +
                                      millis_text(window_end - round.ended)
                                : ""));
  }
  if (!round.acquired) {
    // Undo wherever we took it, and wherever no reply came: the write may have
    // been made even so.
    if (round.acquired_on > 0 || round.answered < n) {
      undo(round.value, keep, true);
    }
    if (hard_error || foreign_error) {
      throw hard_error ? *hard_error : *foreign_error;
    }
    return round;
  }
  m_written.push_back(round.value);
  m_fence = round.fence;
  return round;
}

bool QuorumLock::raise_fences(QuorumRound& round, const std::vector<bool>& acquired,
                              std::int64_t ttl) {
  // Why the highest of our servers' tokens, once a majority's counters hold it,
  // is above every earlier quorum token: an earlier acquisition that reached a
  // majority left its token T' in the counters of a majority M' (raised there, or
  // issued there). Our majority M meets M' in at least one server, any two
  // majorities of the same servers intersect, and that server's counter only
  // grows: the token it issued us is above T', so our max is too. And ours is in
  // turn left on a majority for the next one. A server's counter is only raised
  // while it still holds the token it issued us (Lock::raise_fence), so a raise
  // never lands after another acquisition there; and only within the validity
  // window, like the acquisition itself.
  const std::size_t n = m_channels.size();
  round.fence = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (acquired[i]) {
      round.fence = std::max(round.fence, round.servers[i].attempt->fence);
    }
  }
  std::vector<bool> at_token(n, false);
  round.fenced_on = 0;
  for (std::size_t i = 0; i < n; ++i) {
    at_token[i] = acquired[i] && round.servers[i].attempt->fence == round.fence;
    round.fenced_on += at_token[i] ? 1 : 0;
  }
  // Servers whose counters keep in step (every quorum acquisition raises them)
  // issue the same token: a majority holds it already, no round trip is needed.
  if (round.fenced_on >= majority_of(n)) {
    return true;
  }
  const Micros window_end = validity_end(round.started, ttl);
  std::vector<bool> involved(n);
  for (std::size_t i = 0; i < n; ++i) {
    involved[i] = acquired[i] && !at_token[i];
  }
  const std::size_t majority = majority_of(n);
  const std::size_t level = round.fenced_on;
  const std::int64_t token = round.fence;
  const auto replies = ask<bool>(
      m_channels, [token](QuorumChannel& channel) { return channel.open().raise_fence(token); },
      [majority, level](const Replies<bool>& so_far) {
        std::size_t raised = level;
        for (const auto& value : so_far.values) {
          raised += value && *value ? 1 : 0;
        }
        return raised >= majority                   ? Decision::done_now
               : raised + so_far.pending < majority ? Decision::done_after_grace
                                                    : Decision::open;
      },
      m_deadline ? std::min(*m_deadline, window_end) : window_end, involved);
  round.ended = util::mono_now();
  for (std::size_t i = 0; i < n; ++i) {
    if (replies.errors[i]) {
      util::trace(std::string("quorum: fence not raised: ") + replies.errors[i]->what());
    }
    round.fenced_on += replies.values[i] && *replies.values[i] ? 1 : 0;
  }
  if (util::tracing()) {
    util::trace("quorum: fence " + std::to_string(round.fence) + " raised, held on " +
                std::to_string(round.fenced_on) + " of " + std::to_string(n));
  }
  return quorum_holds(round.fenced_on, n, round.started, round.ended, ttl);
}

}  // namespace nxlock::lock
