// Lockable: what cli/ and run/ ask of a lock, on one server (Lock), a quorum (QuorumLock),
// or a counting semaphore's slot (Semaphore).
//
// Most result types are those of lock.hpp; they are only declared here, so that
// lock.hpp can include this file for Lock to implement it. Callers include
// lock/lock.hpp (or lock/quorum.hpp). The results of renewal, release_after
// and force_release are defined here: each step returns what it did.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/time.hpp"

namespace nxlock::lock {

struct AcquireResult;
struct WaitPolicy;
struct Status;
struct Holder;
enum class Verdict;

// One server's answer in a quorum's last status(), for --json.
struct ServerView {
  std::string server;  // as the user named it (password redacted)
  // foreign: holds something that is not a lock (a page client's value, a wrong type).
  enum class State { free, expired, held, unavailable, foreign };
  State state = State::free;
  std::string value;  // expired/held: the lock value there
  std::string error;  // unavailable, foreign: why
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

class Lockable {
 public:
  virtual ~Lockable() = default;

  // The full store key (prefix included).
  virtual const std::string& key() const = 0;

  // The slot of a counting semaphore (Semaphore, --slots) this lock acts on,
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

  // A descriptor that turns readable when the held lock may have been lost
  // between renewals (etcd: a watch on the holder's key), or -1. A holder
  // polls it beside its renewal timer and, when loss_news() says so, renews
  // at once: the renewal's verdict decides.
  virtual int loss_fd() { return -1; }
  // Reads what loss_fd() has; true when the lock may be lost.
  virtual bool loss_news() { return false; }

  // The held lock's job has run a moment (run-locked): what a job that ends at
  // once would not need may go now (etcd: the holder's details).
  virtual void job_settled() {}

  // Variables the job gets besides NXLOCK_* (etcd: those `etcdctl lock` gives).
  virtual std::vector<std::pair<std::string, std::string>> job_environment() const { return {}; }

  // Each server's answer to the last status(); empty for a single server.
  virtual std::vector<ServerView> server_views() const { return {}; }
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
