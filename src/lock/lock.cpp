// The deadlock-safe lock of the Redis SETNX page.
#include "lock/lock.hpp"

#include <algorithm>
#include <limits>

#include "lock/keys.hpp"
#include "lock/pacing.hpp"
#include "lock/queue_ticket.hpp"
#include "lock/wait_loop.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::Micros;

// A value quoted in a message is cut after this many bytes.
constexpr std::size_t k_quoted_bytes = 40;
// Every key a lock step writes expires this long after the lock's own expiry
// (Store::keep_keys_for): nothing piles up, and no clock mode can see a live
// lock vanish. The holder's belief in its lock ends when the server's clock
// reaches the lock value (plus a second) whatever clock wrote the value, so a
// few seconds would do; an hour also covers a holder's clock stepped by an hour.
constexpr Micros k_expiry_margin{3'600'000'000};

// Never break a key that is not ours to judge: it may be someone's data.
[[noreturn]] void refuse_non_timestamp(std::string_view key, std::string_view text) {
  throw util::Error(util::ErrorKind::data, "lock '" + util::escape(key) + "'",
                    "holds '" + util::escape(text, k_quoted_bytes) +
                        "', not a lock timestamp; refusing to break it");
}

}  // namespace

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
                          "' is not a lock value (the number `lock` printed)");
  }
  return *parsed;
}

Lock::Lock(store::Store& store, Clock& clock, std::string key)
    : Lock(store, clock, std::move(key), std::string()) {
  // A lock named like another lock's counter, details or queue would write them.
  check_lock_key(m_key);
}

Lock::Lock(store::Store& store, Clock& clock, std::string key, std::string queue)
    : m_store(store),
      m_clock(clock),
      m_key(std::move(key)),
      m_fence_key(fence_key(m_key)),
      m_queue_key(queue.empty() ? queue_key(m_key) : std::move(queue)),
      m_holder(m_store, m_key) {}

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
  m_store.keep_keys_for(lifetime_for(std::chrono::seconds(ttl)));

  const auto acquired = [&](std::int64_t fence) {
    m_fence = fence;
    return Attempt{Attempt::Outcome::acquired, value, 0, now, valid_from, fence};
  };

  // SETNX, and the token with it when it sets (see Store's fenced steps).
  const auto set = m_store.set_if_absent(m_key, value, m_fence_key);
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
  m_store.keep_keys_for(lifetime_for(std::chrono::seconds(ttl)));

  // The gate, the SETNX (with its token) and the GET of a busy lock, in one step.
  const auto step = m_store.queue()->set_if_absent(m_key, value, m_fence_key, m_queue_key, ticket,
                                                   waiting, lease);
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
  const auto swap = m_store.get_and_set(m_key, value, store::Takeover{m_fence_key, now});
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
    m_store.compare_and_set(m_key, value, *old);
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

Verdict Lock::why_not(std::string_view value) {
  const auto current = m_store.get(m_key);
  if (!current) {
    return Verdict::absent;
  }
  if (*current != value) {
    return Verdict::taken_over;
  }
  // Our value, but is it our acquisition? A newer one wrote the same timestamp
  // if the counter moved on. An absent counter did not move: every acquisition
  // writes it (the fenced steps count it as ours, and write it back).
  if (m_fence != 0) {
    const auto counter = m_store.get(m_fence_key);
    if (counter && *counter != std::to_string(m_fence)) {
      return Verdict::taken_over;
    }
  }
  return Verdict::expired;
}

bool Lock::swap_value(std::string_view from, std::string_view to) {
  return m_store.compare_and_set(m_key, from, to, fence_guard());
}

bool Lock::raise_fence(std::int64_t token) {
  if (m_fence == 0 || token < m_fence) {
    throw util::Error(util::ErrorKind::internal, "lock '" + util::escape(m_key) + "'",
                      "no fencing token of ours to raise");
  }
  if (token == m_fence) {
    return true;
  }
  // Atomic on every backend: the counter moves only if it still holds our token.
  // Raising a counter never harms the order (later tokens only get larger); the
  // guard is what lets our fenced steps go on using the raised value as ours.
  if (!m_store.compare_and_set(m_fence_key, std::to_string(m_fence), std::to_string(token))) {
    return false;
  }
  m_fence = token;
  return true;
}

bool Lock::delete_value(std::string_view value) {
  store::WaitersQueue* const waiters = m_store.queue();
  if (m_fence == 0) {
    // `unlock KEY VALUE`: no token to compare. The deletion wakes the key's
    // watchers; the first queued waiter may be asleep on its own wake-up alone
    // (the embedded store), so it gets one too.
    const bool deleted = m_store.compare_and_delete(m_key, value);
    if (deleted && waiters != nullptr) {
      try {
        waiters->leave(m_key, m_queue_key, {});
      } catch (const util::Error& e) {
        util::trace(std::string("first waiter not woken (it polls): ") + e.what());
      }
    }
    return deleted;
  }
  // The release wakes the first queued waiter only (all of them, on a backend
  // without a queue).
  return waiters != nullptr ? waiters->compare_and_delete(m_key, value, *fence_guard(), m_queue_key)
                            : m_store.compare_and_delete(m_key, value, fence_guard());
}

std::optional<Verdict> Lock::past_expiry(std::string_view value, std::int64_t now) {
  // "Check the timeout before DEL" (and before any write): past its expiry the
  // lock may already be someone else's; the atomic compare that follows a
  // pre-check passed closes the remaining window.
  if (parse_user_value(m_key, value) >= now) {
    return std::nullopt;
  }
  const Verdict verdict = why_not(value);
  return verdict == Verdict::taken_over ? verdict : Verdict::expired;
}

Verdict Lock::release(std::string_view value) {
  if (const auto verdict = past_expiry(value, now_seconds())) {
    return *verdict;
  }
  const bool deleted = delete_value(value);
  // The deletion woke the waiters. The holder details go after the lock, not
  // before, to keep them off the waiters' path: a new holder's record may
  // already stand there, and the compare-and-delete leaves it alone.
  m_holder.forget(value);
  return deleted ? Verdict::done : why_not(value);
}

Verdict Lock::release_after(std::string_view value, Micros not_before, std::string& kept_value) {
  kept_value.clear();
  const Micros now = m_clock.now();
  if (not_before <= now) {
    return release(value);
  }
  // Expired: the lock may be someone else's already; there is nothing to keep.
  if (const auto verdict = past_expiry(value, util::whole_seconds(now))) {
    return *verdict;
  }
  // not_before > now, so this value is >= now in whole seconds: never already expired.
  const std::string next = std::to_string(expiry_holding_until(not_before));
  m_store.keep_keys_for(lifetime_for(not_before - now));
  // Not a DEL: waiters are left asleep (a compare-and-set wakes none on Redis, and
  // a file-store watcher woken by it finds the lock still held) until the new
  // expiry, where their wait ends by itself.
  const bool swapped = swap_value(value, next);
  if (!swapped) {
    const Verdict verdict = why_not(value);
    m_holder.forget(value);
    return verdict;
  }
  // The details follow the lock's new value and say the job is over.
  m_holder.finish(value, next, util::whole_seconds(now));
  kept_value = next;
  return Verdict::done;
}

Verdict Lock::renew(std::string_view value, std::int64_t ttl, std::string& new_value) {
  const std::int64_t now = now_seconds();
  if (const auto verdict = past_expiry(value, now)) {
    return *verdict;
  }
  const std::string next = std::to_string(expiry_for(now, ttl));
  new_value = next;  // before the write: see renew() in lock.hpp
  m_store.keep_keys_for(lifetime_for(std::chrono::seconds(ttl)));
  const bool swapped = swap_value(value, next);
  if (!swapped) {
    return why_not(value);
  }
  // Keep the details attached to the lock's new value.
  m_holder.follow(value, next);
  return Verdict::done;
}

bool Lock::force_release(std::optional<std::string>& holder_problem) {
  const std::size_t removed = m_store.del({m_key});
  try {
    // Shared holders' leases go too: they would otherwise keep the key held at their next renewal.
    m_store.del({holder_key(m_key), shared_key(m_key)});
  } catch (const util::Error& e) {
    // Advisory details: a corrupt record must not turn a release into a failure.
    holder_problem = e.what();
  }
  return removed > 0;
}

Status Lock::status() {
  Status status;
  status.now_seconds = now_seconds();
  // In every state: the latest token issued (read apart from the value, so not
  // atomically with it).
  if (const auto counter = m_store.get(m_fence_key)) {
    status.fence = store::parse_fence(*counter);
  }
  const auto current = m_store.get(m_key);
  if (!current) {
    return status;
  }
  status.value = *current;
  status.expires_at = parse_or_throw(*current);
  status.state =
      status.expires_at < status.now_seconds ? Status::State::expired : Status::State::held;
  status.holder = read_holder(m_store, m_key, *current);
  // Shared holders keep the key held (only then: no lease lives while it is free).
  if (status.state == Status::State::held && m_store.shared() != nullptr) {
    try {
      status.shared = m_store.shared()->holders(shared_key(m_key));
      status.shared_holders = status.shared.size();
    } catch (const util::Error& e) {
      // Advice beside the lock's state (an ACL may refuse the script): not a failure.
      util::trace(std::string("shared holders not counted: ") + e.what());
    }
  }
  return status;
}

}  // namespace nxlock::lock
