// Lockable: what cli/ and run/ ask of a lock, whatever kind it is and wherever
// it lives: the exclusive lock on one store (Lock), a shared holder or a slot
// of one (LeaseLock), a quorum's (QuorumLock), etcd's Mutex (EtcdMutex). Each
// step returns what it did, in the result types below. A lock comes from a
// LockSpace (lock_space.hpp), which knows the kinds its deployment offers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lock/holder.hpp"
#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock {

// One server's answer to a quorum's status(), for --json.
struct ServerView {
  std::string server;  // as the user named it (password redacted)
  // foreign: holds something that is not a lock (a page client's value, a wrong type).
  enum class State { free, expired, held, unavailable, foreign };
  State state = State::free;
  std::string value;  // expired/held: the lock value there
  std::string error;  // unavailable, foreign: why
};

// What a waiter knows while it waits, for a progress display.
struct WaitProgress {
  std::int64_t held_until = 0;   // the holder's expiry (Unix seconds)
  std::int64_t now_seconds = 0;  // the lock's clock when it was found held
  util::Micros waited{0};        // since acquire() began
};

struct WaitPolicy {
  // How long to keep trying: nullopt waits forever, zero tries once (-n).
  std::optional<util::Micros> wait_for;
  // Readable when the wait must end (a signalfd); -1 for none.
  int interrupt_fd = -1;
  // Called before each wait, and at least once a second while waiting.
  std::function<void(const WaitProgress&)> on_wait;
  // --max-waiters: above zero, a taker that would wait leaves at once
  // (crowded) when this many live waiters, of any kind, are ahead of it in
  // line as it joins. Only where waiters_uncounted() says nothing.
  std::int64_t max_waiters = 0;
};

struct AcquireResult {
  enum class Outcome { acquired, busy, interrupted, crowded };
  Outcome outcome = Outcome::busy;
  std::string value;             // acquired
  std::int64_t held_until = 0;   // busy: until when the holder holds it
  std::string held_value;        // busy: the holder's value (for its details)
  std::int64_t now_seconds = 0;  // busy: the clock reading the last decision was made with
  util::Micros valid_from{0};    // acquired: see Attempt::valid_from
  std::int64_t fence = 0;        // acquired: see Attempt::fence
  std::int64_t waiters_ahead = 0;  // crowded: the live waiters ahead as it joined
};

enum class Verdict {
  done,        // released / renewed
  expired,     // our value has expired: the lock is no longer ours to touch
  taken_over,  // ours was lost: another value is there now
  absent,      // the key does not exist, and never held a lock (no token was issued)
  held_by_other,  // a value that is not the holder's: the lock is held by another value
};

// Applies `step` to `value`, then to each value in `earlier` (newest last) until
// one is done: a write whose reply was lost may still have been made, and the
// key then holds that value, not the one we knew. Release and renewal of
// run-locked and of a quorum both go through here.
template <class Step>
Verdict on_value_or_earlier(const std::string& value, const std::vector<std::string>& earlier,
                            Step&& step) {
  Verdict verdict = step(value);
  for (auto it = earlier.rbegin(); verdict != Verdict::done && it != earlier.rend(); ++it) {
    if (*it != value && step(*it) == Verdict::done) {
      verdict = Verdict::done;
    }
  }
  return verdict;
}

struct Status {
  enum class State { free, expired, held };
  State state = State::free;
  std::string value;
  std::int64_t expires_at = 0;   // the lock value as a number
  std::int64_t now_seconds = 0;  // the clock reading the decision was made with
  std::optional<Holder> holder;
  // The latest fencing token issued for this key (the counter), whatever the
  // state: while only nxlock takes the lock, the current holder's token.
  std::optional<std::int64_t> fence;
  // held: how many leased holders (--shared, or --slots) hold it; 0 for an exclusive holder.
  std::size_t shared_holders = 0;
  // held: the leased holders' leases, with what each recorded (view_shared_holder):
  // shared holders', or slots' ("#N" ids), never both.
  std::vector<store::SharedHolder> shared;
  // held, on etcd: the TTL its lease was granted (seconds; etcd may grant more than asked).
  std::optional<std::int64_t> granted_ttl;
  // free, on etcd: a lock under this key (KEY/b) holds, and by etcd's prefix
  // rule a taker of this key waits for it; its key.
  std::optional<std::string> held_under;
  // A quorum's: each server's answer (--json); empty for a single server.
  std::vector<ServerView> servers;
};

// A renewal decided before any write (Lockable::plan_renewal): the caller
// knows what renew() writes, so that when renew() throws (its reply was lost,
// yet the write may have been made) it can renew from that value too.
struct RenewalPlan {
  std::int64_t ttl = 0;     // seconds
  util::Micros reading{0};  // the lock's clock reading the new expiry was computed from
  // The value renew() writes; empty where renewing writes no value (etcd
  // keeps the lease alive: the key is not written).
  std::string value;
};

// What renew() did.
struct Renewed {
  Verdict verdict;
  std::string value;  // done: the value that holds the lock now
};

// What release_after() did.
struct Kept {
  Verdict verdict;
  std::string value;  // done, and kept for the hold: the value left in place; empty if deleted
};

// What force_release() did.
struct Removal {
  bool removed = false;  // something was there
  // The holder details (or leases) could not go (a corrupt record): why. The
  // lock was released even so.
  std::optional<std::string> holder_problem;
  // Not removed, on etcd: a lock under this key (KEY/b) holds it by etcd's
  // prefix rule; its key, which is not this lock's to release.
  std::optional<std::string> held_under;
};

class HeldNews;

class Lockable {
 public:
  virtual ~Lockable() = default;

  // The full store key (prefix included).
  virtual const std::string& key() const = 0;

  // The slot of a counting semaphore (SlotLock, --slots) this lock acts on,
  // 1..N; 0 for a lock that is not a semaphore (or before it chose a slot).
  virtual int slot() const { return 0; }

  // The fencing token of the acquisition this lock made; 0 if it made none.
  virtual std::int64_t fence() const = 0;

  // Takes the lock with the documented steps, waiting as the policy says.
  // Throws util::Error: unavailable when the backend (or a majority) does not answer.
  virtual AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) = 0;

  // Lets go of the lock still holding `value` (compare-and-delete).
  virtual Verdict release(std::string_view value) = 0;

  // release(), but kept until `not_before` (Unix time, microseconds); see Lock.
  virtual Kept release_after(std::string_view value, util::Micros not_before) = 0;

  // Decides a renewal of the lock holding `value` for `ttl` seconds: reads the
  // clock and computes the value renew() will write. Writes nothing.
  virtual RenewalPlan plan_renewal(std::string_view value, std::int64_t ttl) = 0;

  // Moves the expiry of the lock still holding `value` to the plan's (now + ttl
  // + 1); see Lock. `value` may be an earlier value than the one the plan was
  // made for (on_value_or_earlier): the same plan serves each.
  virtual Renewed renew(std::string_view value, const RenewalPlan& plan) = 0;

  // Both at once, for a caller with nothing to do between them.
  Renewed renew(std::string_view value, std::int64_t ttl) {
    return renew(value, plan_renewal(value, ttl));
  }

  // Records who holds the lock we took (advisory details beside it).
  virtual void record_holder(Holder holder) = 0;

  // Makes this lock stand for the hold `value` that another process took with
  // token `fence` and `ttl` (seconds): run-locked's watchdog, releasing the lock
  // of an nxlock that died. Its later steps on that hold are fenced as the
  // taker's were, so a later holder that wrote the same value is never taken
  // for it. Before any other step; `value` as the lock takes it.
  virtual void resume(std::string_view value, std::int64_t fence, std::int64_t ttl) = 0;

  // The details recorded for the lock holding `value`, if any.
  virtual std::optional<Holder> holder_of(std::string_view value) = 0;

  // Deletes whatever the key holds; see Removal.
  virtual Removal force_release() = 0;

  // The lock's state (a quorum's: the majority's view).
  virtual Status status() = 0;

  // Bounds every later backend exchange by a monotonic deadline, until nullopt:
  // no lock decision may rest on a reply that came after the lock could expire.
  virtual void set_deadline(std::optional<util::Micros> monotonic_deadline) = 0;

  // How much sooner than `ttl` after a write the lock may be gone as others
  // see it (a quorum's clock drift margin); zero on one server, whose own clock decides.
  virtual util::Micros validity_margin(std::int64_t ttl) const {
    (void)ttl;
    return util::Micros(0);
  }

  // Why this lock cannot count the live waiters ahead of a taker
  // (WaitPolicy::max_waiters), in a few words for the user; empty where it can.
  virtual std::string waiters_uncounted() const { return "it keeps no line of waiters"; }

  // Variables the job gets besides NXLOCK_* (etcd: those `etcdctl lock` gives).
  virtual std::vector<std::pair<std::string, std::string>> job_environment() const { return {}; }

  // What this lock says while it is held beyond its renewals' verdicts, or
  // nullptr where it says nothing (see HeldNews).
  virtual HeldNews* held_news() { return nullptr; }
};

// News a held lock gives its holder between renewals (etcd: a watch on the
// holder's key), where its backend has a way to send it.
class HeldNews {
 public:
  virtual ~HeldNews() = default;
  // A descriptor that turns readable when the held lock may have been lost
  // between renewals, or -1 (not yet, or not now). A holder polls it beside
  // its renewal timer and, when lost() says so, renews at once: the
  // renewal's verdict decides.
  virtual int loss_fd() = 0;
  // Reads what loss_fd() has; true when the lock may be lost.
  virtual bool lost() = 0;
  // The held lock's job has run a moment (run-locked): what a job that ends
  // at once would not need may go now (etcd: the holder's details).
  virtual void job_settled() = 0;
};

// A lock of counting-semaphore slots (--slots N): a Lockable that holds one
// slot, and can show every slot.
class SlotLock : public Lockable {
 public:
  // The number of slots.
  virtual int slots() const = 0;
  // From now on, release, renew and the holder details act on slot `slot`
  // (the `unlock`/`renew` of a value that `lock --slots` printed).
  virtual void use_slot(int slot) = 0;
  // Every slot's state, slot 1 first (status --slots, a busy message), as
  // `whole` (status()) shows the key's leases.
  virtual std::vector<Status> statuses(const Status& whole) const = 0;
  std::vector<Status> statuses() { return statuses(status()); }
};

// Sets a lock's deadline for as long as it lives, and clears it after.
class DeadlineScope {
 public:
  DeadlineScope(Lockable& lock, util::Micros monotonic_deadline) : m_lock(lock) {
    m_lock.set_deadline(monotonic_deadline);
  }
  ~DeadlineScope() { m_lock.set_deadline(std::nullopt); }
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  Lockable& m_lock;
};

}  // namespace nxlock::lock
