// Lock's steps on a lock it holds, or that a user names by value: release,
// renewal, --force, status, and the verdicts when one is refused.
#include "store/keys.hpp"
#include "lock/lease_lock.hpp"
#include "lock/lock.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

using util::Micros;

Verdict Lock::why_not(std::string_view value) {
  const auto current = m_store.get(m_key);
  if (!current) {
    // Expired and cleaned up if its time has passed and a lock was ever
    // taken here (the counter); released, or never there, otherwise.
    const auto named = store::parse_lock_timestamp(value);
    const bool passed = named && *named < now_seconds();
    return passed && (m_fence != 0 || m_store.get(m_fence_key)) ? Verdict::expired
                                                                 : Verdict::absent;
  }
  const auto held = store::parse_lock_timestamp(*current);
  if (!held) {
    refuse_non_timestamp(m_key, *current);
  }
  if (*current != value) {
    // Ours (a token of ours) was lost, or a user's value names another lock
    // than the one that holds the key: taken over once it expired, else never the holder's.
    const auto named = store::parse_lock_timestamp(value);
    return m_fence != 0 || (named && *named < now_seconds()) ? Verdict::taken_over
                                                             : Verdict::held_by_other;
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

void Lock::refuse_leased() {
  store::SharedLeases* const shared = m_store.shared();
  if (m_fence != 0 || shared == nullptr) {
    return;  // a token of ours guards every step: no leased taker's step leaves it
  }
  const std::string leases_key = store::shared_key(m_key);
  const store::LeaseSet set =
      shared->read({.lock = m_key, .counter = m_fence_key, .leases = leases_key, .queue = {}});
  if (!set.holding) {
    return;
  }
  const auto& leases = set.leases;
  const bool slots = store::is_slot_lease(leases.front().id);
  std::string why = "held by " + std::to_string(leases.size()) +
                    (slots ? " slot holder" : " shared holder") + (leases.size() == 1 ? "" : "s");
  constexpr std::size_t k_named = 3;
  for (std::size_t i = 0; i < leases.size() && i < k_named; ++i) {
    const SharedHolderView view = view_shared_holder(leases[i]);
    why += (i == 0 ? " (" : ", ") + view.value;
    if (view.holder) {
      why += " pid " + std::to_string(view.holder->pid) + " on " + util::escape(view.holder->host);
    }
  }
  why += leases.size() > k_named ? ", ...)" : ")";
  why += slots ? "; give the SLOT:EXPIRY value `lock --slots` printed"
               : "; give the EXPIRY:ID value `lock --shared` printed";
  why += " (`nxlock status` lists them), or --force to remove every holder";
  throw util::Error(util::ErrorKind::usage, "lock '" + util::escape(m_key) + "'", std::move(why));
}

bool Lock::swap_value(std::string_view from, std::string_view to) {
  return m_store.compare_and_set(m_key, from, to, fence_guard(), step_policy());
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
  if (!m_store.compare_and_set(m_fence_key, std::to_string(m_fence), std::to_string(token),
                               std::nullopt, step_policy())) {
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
    const bool deleted = m_store.compare_and_delete(m_key, value, std::nullopt, step_policy());
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
  return waiters != nullptr
             ? waiters->release_and_wake(m_key, value, *fence_guard(), m_queue_key, step_policy())
             : m_store.compare_and_delete(m_key, value, fence_guard(), step_policy());
}

std::optional<Verdict> Lock::past_expiry(std::string_view value, std::int64_t now) {
  // "Check the timeout before DEL" (and before any write): past its expiry the
  // lock may already be someone else's; the atomic compare that follows a
  // pre-check passed closes the remaining window.
  if (parse_user_value(m_key, value) >= now) {
    return std::nullopt;
  }
  const Verdict verdict = why_not(value);
  return verdict == Verdict::taken_over || verdict == Verdict::absent ? verdict
                                                                      : Verdict::expired;
}

void Lock::resume(std::string_view value, std::int64_t fence, std::int64_t ttl) {
  parse_user_value(m_key, value);
  m_fence = fence;
  m_lifetime = lifetime_for(std::chrono::seconds(ttl));
}

Verdict Lock::release(std::string_view value) {
  refuse_leased();
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

Kept Lock::release_after(std::string_view value, Micros not_before) {
  const Micros now = m_clock.now();
  if (not_before <= now) {
    return {release(value), {}};
  }
  refuse_leased();
  // Expired: the lock may be someone else's already; there is nothing to keep.
  if (const auto verdict = past_expiry(value, util::whole_seconds(now))) {
    return {*verdict, {}};
  }
  // not_before > now, so this value is >= now in whole seconds: never already expired.
  const std::string next = std::to_string(expiry_holding_until(not_before));
  m_lifetime = lifetime_for(not_before - now);
  // Not a DEL: waiters are left asleep (a compare-and-set wakes none on Redis, and
  // a file-store watcher woken by it finds the lock still held) until the new
  // expiry, where their wait ends by itself.
  const bool swapped = swap_value(value, next);
  if (!swapped) {
    const Verdict verdict = why_not(value);
    m_holder.forget(value);
    return {verdict, {}};
  }
  // The details follow the lock's new value and say the job is over.
  m_holder.finish(value, next, util::whole_seconds(now), m_lifetime);
  return {Verdict::done, next};
}

RenewalPlan Lock::plan_renewal(std::string_view value, std::int64_t ttl) {
  (void)value;  // every value of this lock is renewed to the same expiry
  const Micros reading = m_clock.now();
  return {ttl, reading, std::to_string(expiry_for(util::whole_seconds(reading), ttl))};
}

Renewed Lock::renew(std::string_view value, const RenewalPlan& plan) {
  refuse_leased();
  if (const auto verdict = past_expiry(value, util::whole_seconds(plan.reading))) {
    return {*verdict, {}};
  }
  m_lifetime = lifetime_for(std::chrono::seconds(plan.ttl));
  const bool swapped = swap_value(value, plan.value);
  if (!swapped) {
    return {why_not(value), {}};
  }
  // Keep the details attached to the lock's new value.
  m_holder.follow(value, plan.value, m_lifetime);
  return {Verdict::done, plan.value};
}

Removal Lock::force_release() {
  Removal removal;
  const std::size_t removed = m_store.del({m_key});
  try {
    // Leased holders' leases go too: they would otherwise keep the key held at their next renewal.
    const std::string leases = store::shared_key(m_key);
    m_store.del({store::holder_key(m_key), leases, store::details_key(leases)});
  } catch (const util::Error& e) {
    // Advisory details: a corrupt record must not turn a release into a failure.
    removal.holder_problem = e.what();
  }
  // A plain delete wakes the key's watchers; the first queued waiter may sleep on its own wake-up.
  if (store::WaitersQueue* const waiters = m_store.queue(); waiters != nullptr && removed > 0) {
    try {
      waiters->leave(m_key, m_queue_key, {});
    } catch (const util::Error& e) {
      util::trace(std::string("first waiter not woken (it polls): ") + e.what());
    }
  }
  removal.removed = removed > 0;
  return removal;
}

std::optional<std::int64_t> Lock::latest_token() {
  if (const auto counter = m_store.get(m_fence_key)) {
    return store::parse_fence(*counter);
  }
  return std::nullopt;
}

Status Lock::status() {
  Status status;
  status.now_seconds = now_seconds();
  // In every state: the latest token issued (read apart from the value, so not
  // atomically with it).
  status.fence = latest_token();
  // The key and its leases as one read: apart, a renewal between the two
  // reads would make a live set of leases look lost.
  std::optional<std::string> current;
  store::LeaseSet set;
  store::SharedLeases* const shared = m_store.shared();
  const std::string leases_key = store::shared_key(m_key);
  bool leases_read = false;
  if (shared != nullptr) {
    try {
      set = shared->read({.lock = m_key, .counter = m_fence_key, .leases = leases_key, .queue = {}});
      current = set.lock_value;
      leases_read = true;
    } catch (const util::Error& e) {
      // Advice beside the lock's state (an ACL may refuse the script): not a failure.
      util::trace(std::string("shared holders not counted: ") + e.what());
    }
  }
  if (!leases_read) {
    current = m_store.get(m_key);
  }
  if (!current) {
    return status;
  }
  status.value = *current;
  status.expires_at = parse_or_throw(*current);
  status.state =
      status.expires_at < status.now_seconds ? Status::State::expired : Status::State::held;
  status.holder = read_holder(m_store, m_key, *current);
  // Leased holders keep the key held, as long as their set holds its value.
  if (status.state == Status::State::held && set.holding) {
    status.shared = std::move(set.leases);
    status.shared_holders = status.shared.size();
  }
  return status;
}

}  // namespace nxlock::lock
