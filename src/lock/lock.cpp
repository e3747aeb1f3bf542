// The deadlock-safe lock of the Redis SETNX page.
#include "lock/lock.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "store/keys.hpp"
#include "lock/pacing.hpp"
#include "lock/queue_ticket.hpp"
#include "lock/wait_loop.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::k_quoted_bytes;
using util::Micros;

// Every key a lock step writes expires this long after the lock's own expiry
// (store::StepPolicy::lifetime): nothing piles up, and no clock mode can see a live
// lock vanish. The holder's belief in its lock ends when the server's clock
// reaches the lock value (plus a second) whatever clock wrote the value, so a
// few seconds would do; an hour also covers a holder's clock stepped by an hour.
constexpr Micros k_expiry_margin{3'600'000'000};

}  // namespace

void refuse_non_timestamp(std::string_view key, std::string_view text) {
  // Never break a key that is not ours to judge: it may be someone's data.
  throw util::Error(util::ErrorKind::data, "lock '" + util::escape(key) + "'",
                    "holds '" + util::escape(text, k_quoted_bytes) +
                        "', not a lock timestamp; refusing to break it");
}

Micros lifetime_for(Micros held_for) {
  return std::max(held_for, Micros(0)) + std::chrono::seconds(2) + k_expiry_margin;
}

std::int64_t expiry_for(std::int64_t now_seconds, std::int64_t ttl) {
  return now_seconds + ttl + 1;
}

std::int64_t expiry_holding_until(Micros until) {
  // A lock with value V is held while V >= now in whole seconds (floor), that is
  // up to the instant V + 1 exclusive, by every client's reading of the clock.
  // Held until at least `until` means V + 1 >= until: the least such V is
  // ceil(until) - 1. Rounding down instead would free the lock up to a second
  // early; V = ceil(until) would hold it up to a second longer than asked.
  return std::chrono::ceil<std::chrono::seconds>(until).count() - 1;
}

std::int64_t parse_user_value(std::string_view key, std::string_view value) {
  const auto parsed = store::parse_lock_timestamp(value);
  if (!parsed) {
    throw util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'",
                      "'" + util::escape(value, k_quoted_bytes) +
                          "' is not a lock value (EXPIRY as `lock` printed it; EXPIRY:ID "
                          "with --shared; SLOT:EXPIRY with --slots)");
  }
  return *parsed;
}

Lock::Lock(store::Store& store, Clock& clock, std::string key)
    : m_store(store),
      m_clock(clock),
      m_key(std::move(key)),
      m_fence_key(store::fence_key(m_key)),
      m_queue_key(store::queue_key(m_key)),
      m_holder(m_store, m_key) {
  // A lock named like another lock's counter, details or queue would write them.
  store::check_lock_key(m_key);
}

std::int64_t Lock::now_seconds() {
  return util::whole_seconds(m_clock.now());
}

std::int64_t Lock::parse_or_throw(std::string_view text) {
  const auto value = store::parse_lock_timestamp(text);
  if (!value) {
    refuse_non_timestamp(m_key, text);
  }
  return *value;
}

Micros Lock::held_from(Micros before_reading) const {
  // The clock may lag the backend's by lag(): the value written from it then
  // expires that much earlier than `before_reading` + ttl would say.
  return std::min(before_reading, util::mono_now() - m_clock.lag());
}

Attempt Lock::try_once(std::int64_t ttl) {
  // One clock reading per decision: the value we write and the expiry test agree.
  const Micros before = util::mono_now();
  const std::int64_t now = now_seconds();
  const Micros valid_from = held_from(before);
  const std::string value = std::to_string(expiry_for(now, ttl));
  m_lifetime = lifetime_for(std::chrono::seconds(ttl));

  const auto acquired = [&](std::int64_t fence) {
    m_fence = fence;
    return Attempt{Attempt::Outcome::acquired, value, 0, now, valid_from, fence};
  };

  // SETNX, and the token with it when it sets (see Store's fenced steps).
  const auto set = m_store.set_if_absent(m_key, value, m_fence_key, step_policy());
  if (set.fence) {
    return acquired(*set.fence);
  }

  const auto current = m_store.get(m_key);
  if (!current) {
    return {Attempt::Outcome::retry, {}, 0};  // released between SETNX and GET
  }
  return after_setnx(now, valid_from, value, *current);
}

Attempt Lock::try_queued(std::int64_t ttl, std::string_view ticket, bool waiting, Micros lease) {
  const Micros before = util::mono_now();
  const std::int64_t now = now_seconds();
  const Micros valid_from = held_from(before);
  const std::string value = std::to_string(expiry_for(now, ttl));
  m_lifetime = lifetime_for(std::chrono::seconds(ttl));

  // The gate, the SETNX (with its token) and the GET of a busy lock, in one step.
  const auto step = m_store.queue()->take_or_queue(m_key, value, m_fence_key, m_queue_key, ticket,
                                                   waiting, lease, step_policy());
  switch (step.outcome) {
    case store::WaitersQueue::QueuedSet::Outcome::set:
      if (!step.fence) {
        throw util::Error(util::ErrorKind::internal, "lock '" + util::escape(m_key) + "'",
                          "the store issued no fencing token");
      }
      m_fence = *step.fence;
      {
        Attempt acquired{Attempt::Outcome::acquired, value, 0, now, valid_from, *step.fence};
        acquired.dequeued = true;
        return acquired;
      }
    case store::WaitersQueue::QueuedSet::Outcome::held:
      if (!step.current) {
        return {Attempt::Outcome::retry, {}, 0};
      }
      return after_setnx(now, valid_from, value, *step.current);
    case store::WaitersQueue::QueuedSet::Outcome::behind:
      break;
  }
  // Another waiter goes first, even when the lock is free this instant (it is
  // on its way to take it): not a jump ahead of it, not even a takeover.
  Attempt busy{Attempt::Outcome::busy, {}, 0, now};
  if (step.current) {
    busy.held_until = parse_or_throw(*step.current);
  }
  busy.behind = true;
  busy.ahead = step.ahead;
  return busy;
}

Attempt Lock::after_setnx(std::int64_t now, Micros valid_from, const std::string& value,
                          const std::string& current_value) {
  const auto acquired = [&](std::int64_t fence) {
    m_fence = fence;
    return Attempt{Attempt::Outcome::acquired, value, 0, now, valid_from, fence};
  };
  const std::int64_t held_until = parse_or_throw(current_value);
  if (held_until >= now) {
    return {Attempt::Outcome::busy, {}, held_until, now};
  }

  // Expired. Never DEL-then-SETNX (two clients could both succeed): GETSET tells
  // us atomically whether we replaced the expired value or a fresh one. The
  // store takes the token in the same step exactly when the old value says we
  // own the lock (store::getset_owns), with our clock reading or, on the
  // backend's own clock, the backend's at that instant: the token is the verdict.
  const auto swap =
      m_store.get_and_set(m_key, value, store::Takeover{m_fence_key, now}, step_policy());
  const auto& old = swap.old;
  if (swap.fence) {
    return acquired(*swap.fence);  // expired, or deleted meanwhile
  }
  if (!old) {
    throw util::Error(util::ErrorKind::internal, "lock '" + util::escape(m_key) + "'",
                      "the store issued no fencing token for a takeover");
  }
  // Not ours. A store that wrote as GETSET does left our value: give the old
  // one back while the key still holds ours, so that its holder, which renews
  // and releases by compare-and-set of its own value, does not find its lock
  // "taken over" (the page calls the overwrite harmless; C5 won). A store that
  // compares first wrote nothing.
  if (swap.written && *old != value) {
    m_store.compare_and_set(m_key, value, *old, std::nullopt, step_policy());
  }
  const auto old_value = store::parse_lock_timestamp(*old);
  if (!old_value) {
    refuse_non_timestamp(m_key, *old);  // someone stored data here since our GET
  }
  return {Attempt::Outcome::busy, {}, *old_value, now};
}

AcquireResult Lock::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  const bool forever = !policy.wait_for.has_value();
  std::unique_ptr<store::Watcher> watcher;
  // A waiter queues where the backend keeps a queue; a single try (-n) only
  // respects it.
  const bool queued = m_store.queue() != nullptr;
  const bool waiting = queued && (forever || *policy.wait_for > Micros(0));
  std::optional<QueueTicket> ticket;
  if (queued) {
    ticket.emplace(*m_store.queue(), m_key, m_queue_key);
  }
  // Waiters ahead of ours at the last look: the lease of the next one covers
  // the wait that many call for (queue_lease_for).
  std::int64_t ahead = 0;
  // --max-waiters is decided by the step that joined the line: the live
  // waiters it found ahead, counted in the same atomic step as our entry.
  // Later steps only see the line move forward.
  bool joining = waiting && policy.max_waiters > 0;

  WaitSteps steps;
  steps.look = [&] {
    Attempt attempt;
    if (queued) {
      // Joined before the step, so that a step that failed on the way back
      // (the server had it) is left as well.
      ticket->joined(waiting);
      attempt = try_queued(ttl, ticket->ticket(), waiting, queue_lease_for(ahead));
    } else {
      attempt = try_once(ttl);
    }
    Look look;
    if (attempt.held_until != 0 || !attempt.behind) {
      look.held_until = attempt.held_until;
    }
    switch (attempt.outcome) {
      case Attempt::Outcome::acquired:
        // A queued SETNX left the queue in the same step; a takeover by GETSET
        // leaves it now (QueueTicket).
        if (attempt.dequeued) {
          ticket->joined(false);
        }
        look.found = Look::Found::acquired;
        look.taken =
            taken_with(attempt.value, attempt.now_seconds, attempt.valid_from, attempt.fence);
        break;
      case Attempt::Outcome::retry:
        look.found = Look::Found::again;
        break;
      case Attempt::Outcome::busy:
        if (std::exchange(joining, false) && attempt.behind &&
            attempt.ahead >= policy.max_waiters) {
          // Our entry leaves with the ticket; a taker after us that counted it
          // had as many live waiters ahead of it without it.
          look.found = Look::Found::crowded;
          look.now_seconds = attempt.now_seconds;
          look.ahead = attempt.ahead;
          break;
        }
        look.found = Look::Found::busy;
        look.now_seconds = attempt.now_seconds;
        // Not ours to try when behind: the first waiter is woken by the
        // release, and the step renews our lease and tells us when we are first.
        look.behind = attempt.behind;
        // Paced by the fewer of then and now: this step's lease was chosen
        // for the waiters ahead at the last look, and must outlast the wait.
        look.ahead = std::min(ahead, attempt.ahead);
        look.wake_at = attempt.held_until;
        break;
    }
    ahead = attempt.ahead;
    return look;
  };
  watch_key(steps, m_store, m_key, ticket, watcher);
  return wait_for_lock(policy, m_clock, steps);
}

}  // namespace nxlock::lock
