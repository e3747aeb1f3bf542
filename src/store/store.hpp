// Store: the handful of atomic operations every backend offers (Redis, embedded file store).
//
// Every operation is atomic with respect to every other client of the same backend.
// "Absent" and "not set" are values (std::optional, bool), never errors. Failures
// throw util::Error: unavailable (69), data (65), permission (77) or internal (70),
// naming the URL, path or key involved.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/time.hpp"

namespace nxlock::store {

enum class WaitResult {
  changed,      // the key may have changed: look again
  timed_out,    // the timeout passed with no sign of a change
  interrupted,  // the interrupt descriptor became readable
};

// A watch on one key, armed when created: a deletion (Store::del,
// Store::compare_and_delete) made after Store::watch() returned is never missed
// by a later wait(). Other writes may wake it too (the file store sees every
// change), or not (Redis publishes only deletions): a waiter for a lock waits
// for its deletion, or its expiry, which it times itself.
class Watcher {
 public:
  virtual ~Watcher() = default;

  // Blocks until the key may have changed, `timeout` passes, or `interrupt_fd`
  // (if >= 0) becomes readable. Spurious `changed` results are allowed.
  virtual WaitResult wait(util::Micros timeout, int interrupt_fd) = 0;

  // Whether the queued waiter is first now (WaitersQueue::watch_turn): a waiter behind another
  // need not see the key's changes at all, only the wake-up addressed to it.
  virtual void first(bool) {}

  // A descriptor that turns readable when wait(0, -1) may report `changed`,
  // for a caller that polls it beside others (run-locked's holder, on its
  // --replace request); -1 where there is none (the caller then looks on a
  // timer of its own).
  virtual int fd() const { return -1; }
};

// A fenced step's guard: the counter beside the lock (on a Redis Cluster, in the
// lock key's hash slot) must still hold the holder's `token`, or be absent
// (lost: every acquisition writes it, so none came since it went; the step
// writes it back as `token`). Two acquisitions that wrote the same value are
// told apart by their tokens. (The embedded store keeps each lock's token in
// the lock's own entry, and compares that one.)
struct Fence {
  std::string_view counter;
  std::int64_t token = 0;
};

// get_and_set()'s ownership guard: a token is issued from `counter` only if the
// old value was absent or a lock timestamp older than `now_seconds` (getset_owns
// in fenced_steps.hpp). `now_seconds` is the clock reading the caller's own
// decision uses; with StepPolicy::own_clock the backend may decide with its
// own clock at the instant of the step instead.
struct Takeover {
  std::string_view counter;
  std::int64_t now_seconds = 0;
};

// What set_if_absent() did.
struct SetIfAbsent {
  bool set = false;
  std::optional<std::int64_t> fence;  // fenced: the token the counter issued, when set
  explicit operator bool() const { return set; }
};

// What get_and_set() did.
struct Swap {
  std::optional<std::string> old;     // the old value (nullopt if there was none)
  std::optional<std::int64_t> fence;  // with a Takeover: the token, if getset_owns(old)
  // Whether `value` was written. A backend that compares first writes only
  // when it owns (fence); one that writes as GETSET does may leave the value
  // of a step that did not own, for the caller to give back.
  bool written = true;
};

class WaitersQueue;
class SharedLeases;

// A live shared lease (SharedLeases::holders, LockListing).
struct SharedHolder {
  std::string id;
  std::int64_t expiry = 0;             // a lock value: held through this Unix second
  std::optional<std::string> details;  // what SharedLeases::record_details recorded, if it did
};

// A lock's key and its live leases, read at one instant (SharedLeases::read).
struct LeaseSet {
  std::optional<std::string> lock_value;  // the lock key's value, if it exists
  std::vector<SharedHolder> leases;       // the live leases
  // Whether they hold the key: it holds the latest one's expiry, and no other
  // holder took it since. Leases of a set that lost the key are no holders.
  bool holding = false;
};

// Whether a lease id is a slot's ("#N") rather than a shared holder's.
inline bool is_slot_lease(std::string_view id) {
  return !id.empty() && id.front() == '#';
}

class LockListing;

// How a lock step treats the keys it writes, passed with the step, always
// (the key/value commands pass k_plain_step): no default, so that a step that
// forgot it does not compile rather than write keys that never expire.
// Backends that expire nothing by themselves, or keep no clock of their own,
// may ignore it.
struct StepPolicy {
  // Every key the step writes (the lock, its holder details, its counter) is
  // kept at least this long from the write, and then expires: Redis sets the
  // expiry in the same script as the write (SET and GETSET drop one). A fencing
  // counter is kept Store::k_fence_keep (or this, if longer) after each step
  // that uses it. Zero: the lock and holder keys get no expiry.
  util::Micros lifetime{0};
  // The lock's "now" is this backend's own clock (the default clock, not
  // --clock local): get_and_set() with a Takeover may then decide expiry with
  // the backend's clock at the instant of the step, rather than on a carried
  // estimate of it.
  bool own_clock = false;
};

// The key/value commands' policy (setnx, getset, set, ...): the user's keys,
// written as they are, never given an expiry.
inline constexpr StepPolicy k_plain_step{};

class Store {
 public:
  // How long a fencing counter outlives its last use (StepPolicy): long
  // enough that a failover or a quorum server's clock skew cannot make tokens
  // of back-to-back holders go back.
  static constexpr util::Micros k_fence_keep{7LL * 24 * 3600 * 1'000'000};

  virtual ~Store() = default;

  // The backend as a user would name it (URL with password redacted, or path).
  virtual std::string describe() const = 0;

  // ---- The steps: each plain (the key/value commands), or fenced for a lock ----
  //
  // A fenced step is a lock's owning step together with its fencing counter.
  // Only an owning step increments the counter, in the same atomic step as the
  // write that owns the lock, so every acquisition's token is above every
  // earlier one's, and a holder paused past its expiry never holds a token
  // above its successor's. nxlock never resets it. Throws util::Error(data) if
  // the counter holds something else than an integer (nothing is written then).

  // Each step that writes takes a StepPolicy last, and every argument before it
  // (no defaults): the lock layer's, for a lock's step; k_plain_step for the
  // key/value commands.

  // SETNX: sets key to value if it does not exist. With a `counter`, INCR it,
  // only if that set the key, atomically: `fence` is the token.
  virtual SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                                    std::optional<std::string_view> counter, StepPolicy policy) = 0;

  // GET: the value, or nullopt if the key does not exist.
  virtual std::optional<std::string> get(std::string_view key) = 0;

  // GETSET: sets key to value and returns the old value. With a `takeover`,
  // the step also takes a token exactly when the caller owns the lock (see
  // Takeover): the caller owns it exactly when `fence` is set.
  virtual Swap get_and_set(std::string_view key, std::string_view value,
                           std::optional<Takeover> takeover, StepPolicy policy) = 0;

  // SET: sets key to value unconditionally.
  virtual void set(std::string_view key, std::string_view value, StepPolicy policy) = 0;

  // DEL: removes the keys that exist, and wakes each key's watchers; returns
  // how many were removed.
  virtual std::size_t del(const std::vector<std::string>& keys) = 0;

  // Deletes key only if it holds exactly `expected` (and the `fence` holds),
  // and then wakes the key's watchers. True if deleted.
  virtual bool compare_and_delete(std::string_view key, std::string_view expected,
                                  std::optional<Fence> fence, StepPolicy policy) = 0;

  // Sets key to `value` only if it holds exactly `expected` (and the `fence`
  // holds). True if set.
  virtual bool compare_and_set(std::string_view key, std::string_view expected,
                               std::string_view value, std::optional<Fence> fence,
                               StepPolicy policy) = 0;

  // The waiters' queue, or nullptr if this backend keeps none.
  virtual WaitersQueue* queue() { return nullptr; }

  // The shared holders' leases (--shared), or nullptr if this backend keeps none.
  virtual SharedLeases* shared() { return nullptr; }

  // The enumeration of the locks held (lock_listing.hpp), or nullptr if this
  // backend cannot list its keys.
  virtual LockListing* listing() { return nullptr; }

  // The backend's clock as Unix time: Redis TIME, or the local clock for the file store.
  virtual util::Micros now() = 0;

  // Starts watching key for changes (see Watcher).
  virtual std::unique_ptr<Watcher> watch(std::string_view key) = 0;

  // Wakes the watchers of `key` after a write that is not a deletion, on a
  // backend whose watchers see deletions alone (Redis PUBLISHes the key's
  // channel); best effort, never throws. The default does nothing: the
  // backend's watchers see every change.
  virtual void wake(std::string_view key) { (void)key; }

  // ---- A bound on every exchange (optional; the default does nothing) ----

  // Bounds every later operation by a monotonic deadline (util::mono_now()
  // time), on top of the backend's own per-command timeout, until called
  // again with nullopt. run-locked's renewal sets it to the moment its lock
  // could expire: no lock decision may rest on a reply that came later.
  // Backends that never wait on a network may ignore it.
  virtual void set_deadline(std::optional<util::Micros>) {}
};

// The waiters' queue: one wake-up per release, in arrival order.
//
// `queue` is a companion key beside the lock (on a Redis Cluster, in its slot;
// the backend may keep more keys named after it). It holds tickets, each in
// arrival order with a liveness lease; an entry whose lease has lapsed (its
// waiter died) is dropped by the next step that meets it. The lock key and its
// value are untouched by the queue: clients that know nothing of it still
// interoperate, they are only not queued.
class WaitersQueue {
 public:
  virtual ~WaitersQueue() = default;

  struct QueuedSet {
    enum class Outcome {
      set,     // the key was set (token in `fence`); the ticket left the queue, or (the
               // embedded store) leaves it at this store's next write or close
      held,    // the ticket may go first, but the key exists: `current` holds its value
      behind,  // another live waiter is ahead: nothing was tried; `current` as GET says
    };
    Outcome outcome = Outcome::behind;
    std::optional<std::int64_t> fence;
    std::optional<std::string> current;
    // behind: how many live waiters are ahead of the ticket, counted in the
    // step that queued it (0 where the store does not say), so that one far
    // back may look less often, and --max-waiters may refuse to wait.
    std::int64_t ahead = 0;
  };
  // A waiter handed its turn (by a release, or a leave, or a dropped dead
  // first) keeps its place this long at most without a step of its own,
  // whatever lease it renewed last: a long lease far back in the line costs
  // the others no more than this once its waiter is first.
  static constexpr util::Micros k_turn_lease{1'000'000};
  // Takes the lock in the queue's order: Store::set_if_absent() with a counter,
  // only while `ticket` may go first (the queue holds no live waiter, or
  // `ticket` is its first live one). With `waiting`, a ticket that did not take
  // also joins the queue (at the back, if it is not in it) and its lease is
  // renewed to now + `lease`, all in the same atomic step.
  virtual QueuedSet take_or_queue(std::string_view key, std::string_view value,
                                  std::string_view counter, std::string_view queue,
                                  std::string_view ticket, bool waiting, util::Micros lease,
                                  StepPolicy policy) = 0;

  // Releases a lock taken in the queue's order: Store::compare_and_delete()
  // with a fence, waking only the queue's first live waiter (or every watcher
  // of the key, when the queue is empty).
  virtual bool release_and_wake(std::string_view key, std::string_view expected, const Fence& fence,
                                std::string_view queue, StepPolicy policy) = 0;

  // Takes `ticket` out of the queue; if that leaves a live waiter first while
  // `key` is free, wakes it. An empty ticket only wakes.
  virtual void leave(std::string_view key, std::string_view queue, std::string_view ticket) = 0;

  // Watches for the turn of a waiter queued with `ticket`: Store::watch() on
  // the key, and the wake-ups addressed to the ticket, armed for both when it
  // returns: a wake-up addressed to the ticket after this returned is never
  // missed either. A wake-up addressed to another waiter's ticket is not a
  // change for this one: it sleeps on. Wake-ups addressed to nobody in
  // particular (a DEL, an older client) still wake it.
  virtual std::unique_ptr<Watcher> watch_turn(std::string_view key, std::string ticket) = 0;

 protected:
  // take_or_queue() answered as a queued step (set, or held with the value a
  // busy lock needs): for a step the queue does not take part in.
  static QueuedSet unqueued(Store& store, std::string_view key, std::string_view value,
                            std::string_view counter, StepPolicy policy) {
    QueuedSet result;
    result.fence = store.set_if_absent(key, value, counter, policy).fence;
    if (result.fence) {
      result.outcome = QueuedSet::Outcome::set;
    } else {
      result.outcome = QueuedSet::Outcome::held;
      result.current = store.get(key);
    }
    return result;
  }
};

// Leased holders of a lock: shared holders (flock -s), any number of them, or
// the slot holders of a counting semaphore (--slots N), at most N; never both,
// and never beside an exclusive holder.
//
// `leases` is a companion key beside the lock (on a Redis Cluster, in its
// slot) holding one lease per holder: its id and its expiry, a lock value
// (Unix seconds, expired when older than the store's now). A shared holder's
// id is "s" and 16 hex digits; a slot holder's is "#" and its slot number.
// While a live lease exists, the lock key itself holds the latest live
// lease's expiry, so every exclusive taker (nxlock, or any client of the
// page's steps) finds the lock held and waits: exclusive locks pay nothing for
// leased ones. The set holds the lock only while the key holds exactly that
// value: once anything else wrote or deleted the key (a DEL or GETSET of a
// page client, --force, an expiry and a takeover), every lease of the set is
// lost, its renewals and releases refused, and the next take starts a new
// set. Expired leases are dropped by the next step that meets them.
class SharedLeases {
 public:
  virtual ~SharedLeases() = default;

  // The keys one lock's leases live in: the lock, its fencing counter, the
  // lease set and the waiters' queue (store/keys.hpp names them).
  struct Keys {
    std::string_view lock;
    std::string_view counter;
    std::string_view leases;
    std::string_view queue;
  };

  struct Take {
    enum class Outcome {
      taken,   // the lease is ours (token in `fence`); a queued ticket left the queue
      held,    // an exclusive holder, the other kind, every slot (or data) holds the key:
               // `current` is the key's value
      behind,  // another live waiter is first in `queue`: nothing was tried
    };
    Outcome outcome = Outcome::behind;
    std::optional<std::int64_t> fence;
    std::optional<std::string> current;
    std::string id;  // taken: the lease's id (a slot's, as the store chose it)
    std::int64_t ahead = 0;  // behind: the live waiters ahead, as QueuedSet::ahead
  };
  struct TakeRequest {
    std::string_view id;   // a shared holder's id; empty for a slot ("#N", chosen by the store)
    int slots = 0;         // 0: a shared lease; N: a slot of N, the lowest free one
    std::int64_t expiry = 0;
    std::string_view ticket;  // the waiter's ticket in `queue` (empty: none)
    bool waiting = false;     // a ticket that did not take joins the queue
    util::Micros lease{0};    // ... with this liveness lease (WaitersQueue::take_or_queue)
  };
  // One atomic step: the lease, taken when the lock key is absent or expired
  // (a new set), or held by a live set of the same kind with room for one more;
  // and no live waiter of `queue` other than the ticket is first (writer
  // preference: an exclusive waiter queued first is not overtaken). The token
  // comes from the lock's own counter, so it is above every token issued for
  // the key before, whatever the kind. A ticket that took leaves the queue and
  // wakes the next waiter.
  virtual Take take(const Keys& keys, const TakeRequest& request, StepPolicy policy) = 0;

  // The lease a renewal or a release is for. A value names its lease by id
  // and expiry; a slot's id ("#N") and expiry are another holder's too once
  // that holder took the same slot in the same second, so a holder that took
  // the lease itself (run-locked) also names the token of its take.
  struct LeaseMatch {
    std::string_view id;
    std::optional<std::int64_t> expiry;  // the lease's expiry, if the value names it
    std::optional<std::int64_t> token;   // the token of its take, if the caller took it
  };

  // Moves the live lease `lease` names to `expiry` (and the lock key with it),
  // only while its set still holds the lock key. False otherwise: the lease is
  // no longer ours. A lease of an older nxlock has no token to match.
  virtual bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
                     StepPolicy policy) = 0;

  // Removes the lease on the same conditions; the last live one deletes
  // the lock key. A release wakes the first waiter of `queue` (or every
  // watcher) when it frees room: the last lease, or any slot. True if done.
  virtual bool release(const Keys& keys, const LeaseMatch& lease, StepPolicy policy) = 0;

  // Records `details` (one line: who holds it, as the lock layer writes it)
  // beside the live lease `id`, removed with the lease and expiring with it.
  // False (nothing written) if the lease is gone.
  virtual bool record_details(std::string_view leases, std::string_view id,
                              std::string_view details) = 0;

  // The lock key's value and its live leases (each with its details if its
  // holder recorded them), read in one atomic step: read apart, a renewal
  // between the two reads would make a live set look as if it lost the key.
  virtual LeaseSet read(const Keys& keys) = 0;
};

}  // namespace nxlock::store
