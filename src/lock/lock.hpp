// The deadlock-safe lock of the Redis SETNX page, written once over Store + Clock.
//
// A lock is a key whose value is the decimal Unix time (seconds) at which it
// expires: now + ttl + 1. It is expired when that time is older than now
// (value < now); a value equal to now is still held.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lock/clock.hpp"
#include "lock/holder.hpp"
#include "lock/lockable.hpp"
#include "lock/queue_ticket.hpp"
#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock {

// How long the keys of a lock that expires `held_for` from now are kept
// (store::StepPolicy::lifetime): nothing piles up, and no clock mode sees a live lock vanish.
util::Micros lifetime_for(util::Micros held_for);

// The lock value for a lock taken at `now_seconds` for `ttl` seconds.
std::int64_t expiry_for(std::int64_t now_seconds, std::int64_t ttl);

// The lock value that keeps a lock held until at least `until` (Unix time) and
// expires as soon after it as the value format allows.
std::int64_t expiry_holding_until(util::Micros until);

// Why one pass of the documented steps did not take the lock.
struct Attempt {
  enum class Outcome {
    acquired,  // SETNX said 1, or GETSET returned an expired (or no) value
    busy,      // the lock is held until `held_until`
    retry,     // the key changed under us (deleted between SETNX and GET): go again
  };
  Outcome outcome = Outcome::busy;
  std::string value;             // acquired: the value we wrote
  std::int64_t held_until = 0;   // busy: the holder's expiry
  std::int64_t now_seconds = 0;  // the clock reading the decision was made with
  // acquired: a monotonic time no later than the clock reading `value` was
  // computed from, so the lock is held at least until valid_from + ttl.
  util::Micros valid_from{0};
  // acquired: the fencing token, above every earlier acquisition's of this key
  // on this backend (>= 1).
  std::int64_t fence = 0;
  // busy: another queued waiter goes first (try_queued); nothing was tried.
  bool behind = false;
  // behind: how many waiters are ahead (0 where the store does not say).
  std::int64_t ahead = 0;
  // acquired by try_queued's SETNX, which took the ticket out of the queue.
  bool dequeued = false;
};

class Lock final : public Lockable {
 public:
  // `key` is the full store key (prefix included). `ttl` is in whole seconds.
  // Throws util::Error(usage) for a key named like another lock's companion
  // (check_lock_key in keys.hpp).
  Lock(store::Store& store, Clock& clock, std::string key);

  // One pass of the documented steps: SETNX; on 0, GET; if expired, GETSET and
  // own the lock only if the old value is itself expired or absent. The owning
  // SETNX or GETSET also takes a fencing token, in the same atomic step (Store's
  // fenced steps), and this Lock remembers it: from then on its release, renew
  // and release_after act only while the counter still holds it, so another
  // acquisition that wrote the same value is never taken for ours.
  // Throws util::Error(data) if the key holds something that is not a timestamp.
  Attempt try_once(std::int64_t ttl);

  // try_once() for a backend with a waiters' queue (Store::queue): the
  // SETNX is tried only while `ticket` may go first (no live waiter queued
  // ahead of it), and with `waiting` the ticket joins the queue (or keeps its
  // place) and renews its lease to `lease`, in the same step. The SETNX leaves
  // the queue when it sets; a takeover by GETSET does not (the caller leaves).
  Attempt try_queued(std::int64_t ttl, std::string_view ticket, bool waiting,
                     util::Micros lease = k_queue_lease);

  // Repeats try_once() as the policy says, sleeping until the holder releases
  // (a store wake-up), its timestamp expires, or a short jittered poll tick.
  // On a backend with a waiters' queue, a waiter queues (try_queued) and only
  // the first live one tries, woken alone by the release; the others renew
  // their lease on a slower tick. It leaves the queue however it ends.
  AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) override;

  // Deletes the lock only if it still holds `value` and has not expired (atomic
  // compare-and-delete), then wakes waiters.
  Verdict release(std::string_view value) override;

  // release(), but the lock is not let go before `not_before` (Unix time on this
  // lock's clock, microseconds): while that is still ahead, the expiry of the lock
  // still holding `value` is moved to it instead (atomic compare-and-set, as renew
  // does; shorter or longer than the ttl) and the holder details stay, marked
  // finished. The value left in place comes back with the verdict (none when the
  // lock was deleted). Verdicts as for release().
  Kept release_after(std::string_view value, util::Micros not_before) override;

  // Reads the clock once: the renewal writes now + ttl + 1.
  RenewalPlan plan_renewal(std::string_view value, std::int64_t ttl) override;

  // Moves the expiry of a lock still holding `value` to the plan's value
  // (atomic compare-and-set); on success the lock holds the plan's value. If
  // it throws, the plan's value may have been stored even so (the reply was
  // lost): renew from that value too.
  Renewed renew(std::string_view value, const RenewalPlan& plan) override;
  using Lockable::renew;

  // Records who holds the lock we took (advisory details beside it, see holder.hpp).
  void record_holder(Holder holder) override { m_holder.record(std::move(holder), m_lifetime); }

  void resume(std::string_view value, std::int64_t fence, std::int64_t ttl) override;

  // Deletes whatever the key holds, holds of every kind; true if something
  // was there, and the first waiter is woken. The holder details and leases go
  // too, best effort: if they cannot (a corrupt record), the lock is still
  // released and the Removal says why.
  Removal force_release() override;

  // Reads the lock's state and, when held, the holder's details.
  Status status() override;

  // The latest token issued for this key (the counter), whatever the key holds.
  std::optional<std::int64_t> latest_token();

  // Quorum mode: moves this backend's fencing counter up to `token` (the quorum's
  // token), only while it still holds this lock's own token, that is while no
  // acquisition of the key has been made here since ours (every owning step
  // increments it): one atomic compare-and-set of the counter. From then on this
  // lock's fenced steps use `token`. True if the counter now holds `token` for
  // us (already so if ours was `token`); false if another acquisition came
  // first. Only after try_once() took the lock, with token >= our own.
  bool raise_fence(std::int64_t token);

  const std::string& key() const override { return m_key; }
  std::int64_t fence() const override { return m_fence; }
  store::Store& store() { return m_store; }
  // The policy passed with each of this lock's steps (and a quorum's steps on
  // its store): the lifetime of its keys, and whose clock decides.
  store::StepPolicy step_policy() const { return {m_lifetime, m_clock.is_store_clock()}; }

  std::optional<Holder> holder_of(std::string_view value) override {
    return read_holder(m_store, m_key, value);
  }
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_store.set_deadline(monotonic_deadline);
  }
  // Counted by the step that queues the taker, where the backend keeps a queue.
  std::string waiters_uncounted() const override {
    return m_store.queue() != nullptr ? "" : "this backend keeps no line of waiters";
  }

 private:
  std::int64_t now_seconds();
  // The monotonic instant from which a lock whose value was computed from a
  // clock reading taken after `before_reading` is held at least ttl seconds.
  util::Micros held_from(util::Micros before_reading) const;
  std::int64_t parse_or_throw(std::string_view text);
  // The documented steps after a SETNX that found `current` there: busy, or the
  // GETSET takeover of an expired lock.
  Attempt after_setnx(std::int64_t now, util::Micros valid_from, const std::string& value,
                      const std::string& current);
  Verdict why_not(std::string_view value);
  // `unlock`/`renew` of a bare value (no token of ours): throws
  // util::Error(usage) while leased holders hold the key, whose values are theirs.
  void refuse_leased();
  // The verdict for a lock value that expired before `now` (whole seconds on
  // this lock's clock), or nullopt while it may still be held. Throws
  // util::Error(usage) if `value` is not a lock value.
  std::optional<Verdict> past_expiry(std::string_view value, std::int64_t now);
  // Compare-and-set / compare-and-delete of the lock's value, fenced by our
  // token when we took the lock ourselves.
  bool swap_value(std::string_view from, std::string_view to);
  bool delete_value(std::string_view value);
  // The guard of our fenced steps: our token in the counter; none before we
  // took the lock ourselves (unlock KEY VALUE).
  std::optional<store::Fence> fence_guard() const {
    if (m_fence == 0) {
      return std::nullopt;
    }
    return store::Fence{m_fence_key, m_fence};
  }

  store::Store& m_store;
  Clock& m_clock;
  std::string m_key;
  std::string m_fence_key;
  std::string m_queue_key;
  std::int64_t m_fence = 0;  // our acquisition's token, once try_once() took the lock
  // How long the keys of this lock's last write are kept (lifetime_for): set by
  // each step that moves the lock's expiry (an acquisition, a renewal, a
  // release_after), and passed with every later step, which keeps the keys it
  // writes (holder details, counter) as long. Zero before any: no expiry.
  util::Micros m_lifetime{0};
  HolderBook m_holder;
};

// Throws util::Error(data): `key` holds `text`, which is not a lock timestamp.
[[noreturn]] void refuse_non_timestamp(std::string_view key, std::string_view text);

// Parses a lock value given by a user (unlock/renew): throws util::Error(usage).
std::int64_t parse_user_value(std::string_view key, std::string_view value);

}  // namespace nxlock::lock
