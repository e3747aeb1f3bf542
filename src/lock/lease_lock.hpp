// LeaseLock: a leased holder of a lock: a shared one (--shared, as flock -s: any
// number of them hold the lock at once) or a slot of a counting semaphore
// (--slots N: at most N at once); never beside an exclusive holder (Lock) or a
// holder of the other kind.
//
// Each leased holder has a lease beside the lock (store::SharedLeases); while
// one lives, the lock key holds the latest lease's expiry, so exclusive takers
// of every kind find the lock held, and every token comes from the lock's one
// counter. The values `lock` prints, which unlock and renew take as printed:
//   shared  "EXPIRY:ID"  the lease's expiry (a lock value) and its own id;
//   slot    "SLOT:EXPIRY" the slot (1..N) and the lease's expiry.
// Inside the lock layer a slot's value is its EXPIRY alone, with slot() naming
// the slot, as run-locked renews and releases it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/clock.hpp"
#include "lock/lock.hpp"
#include "store/store.hpp"

namespace nxlock::lock {

// --slots is at most this: far more than any fleet runs at once.
inline constexpr int k_max_slots = 1000;

// Which kind of hold a value a user gives (unlock, renew) names, by its form.
enum class ValueForm {
  exclusive,  // "EXPIRY"
  shared,     // "EXPIRY:ID"
  slot,       // "SLOT:EXPIRY"
  other,      // none of them
};
ValueForm value_form(std::string_view value);

// Whether `value` is a shared holder's value ("EXPIRY:ID").
bool is_shared_value(std::string_view value);

// A slot's value as `lock --slots` prints it: "SLOT:EXPIRY" ("3:1795587227").
std::string slot_value(int slot, std::string_view value);

// The slot and lock value of a slot's value given by a user, for a semaphore
// of `slots` slots. Throws util::Error(usage) for anything else, a bare
// timestamp included (it names no slot).
struct SlotValue {
  int slot = 0;
  std::string value;
};
SlotValue parse_slot_value(std::string_view key, std::string_view text, int slots);

// A live leased holder as `status` and `list` show it, from its lease and the
// details it recorded beside it ("TOKEN HOLDER-JSON", LeaseLock::record_holder).
struct SharedHolderView {
  std::string value;  // as `lock` printed it: "EXPIRY:ID", or "SLOT:EXPIRY"
  int slot = 0;       // a slot's number; 0 for a shared holder
  std::int64_t expires_at = 0;
  std::optional<std::int64_t> fence;  // the token of its take (none from an older nxlock)
  std::optional<Holder> holder;
};
SharedHolderView view_shared_holder(const store::SharedHolder& lease);

// The kind of the live leases `leases` that hold a lock: "shared" or "slots".
const char* lease_kind(const std::vector<store::SharedHolder>& leases);

// A shared holder is a LeaseLock of no slots: SlotLock's steps are a slot's.
class LeaseLock final : public SlotLock {
 public:
  // A shared holder of `key` (the full store key) when `slots` is 0, else a
  // slot holder of a semaphore of `slots` slots (1..k_max_slots). Throws
  // util::Error(usage) for a key named like another lock's companion, a bad
  // count, or a backend that keeps no leases.
  LeaseLock(store::Store& store, Clock& clock, std::string key, int slots);

  const std::string& key() const override { return m_key; }
  std::int64_t fence() const override { return m_fence; }
  // The slot held (acquire) or named (use_slot); 0 for a shared holder.
  int slot() const override { return m_slot; }
  // The number of slots; 0 for a shared holder.
  int slots() const override { return m_slots; }
  // From now on, release, renew and the holder details act on slot `slot`
  // (the `unlock`/`renew` of a value that `lock --slots` printed).
  void use_slot(int slot) override;

  // Takes a lease, waiting as the policy says: while an exclusive holder, the
  // other kind or every slot holds the key, or (writer preference) an earlier
  // waiter is first in the queue. A waiter queues as Lock's do, so a leased
  // waiter behind an exclusive one waits for it, and leased waiters woken in
  // turn come along together. Throws util::Error(data) if the key holds
  // something that is not a timestamp.
  AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) override;

  // Gives up the lease `value` names, while its set still holds the key; the
  // last live one frees the key, and it or any slot wakes the first waiter.
  // Throws util::Error(usage) if `value` is not a value of this kind.
  Verdict release(std::string_view value) override;

  // release(), but while `not_before` is ahead the lease is kept until then.
  Kept release_after(std::string_view value, util::Micros not_before) override;

  // Reads the clock once: the lease `value` names moves to now + ttl + 1. Throws
  // util::Error(usage) if `value` is not a value of this kind.
  RenewalPlan plan_renewal(std::string_view value, std::int64_t ttl) override;

  // Moves the lease's expiry to the plan's, if it still holds the key.
  Renewed renew(std::string_view value, const RenewalPlan& plan) override;
  using Lockable::renew;

  // Records who holds the lease, with its token, beside the lease (traced, never thrown).
  void record_holder(Holder holder) override;
  void resume(std::string_view value, std::int64_t fence, std::int64_t ttl) override {
    m_id = lease_of(value).id;
    m_fence = fence;
    m_lifetime = lifetime_for(std::chrono::seconds(ttl));
  }
  // The details of the holder of `value`: the exclusive holder's, for a leased
  // taker that found one; a slot's, for its EXPIRY.
  std::optional<Holder> holder_of(std::string_view value) override;
  Removal force_release() override { return m_lock.force_release(); }
  Status status() override { return m_lock.status(); }
  // Every slot's state, slot 1 first (status --slots, a busy message), as
  // `whole` (status()) shows the key's leases.
  std::vector<Status> statuses(const Status& whole) const override;
  using SlotLock::statuses;
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_store.set_deadline(monotonic_deadline);
  }
  // Counted by the take that queues the taker (SharedLeases::Take::ahead).
  std::string waiters_uncounted() const override {
    return m_store.queue() != nullptr ? "" : "this backend keeps no line of waiters";
  }

 private:
  // The lease a value names: its id, and the expiry it must still have (a
  // value renewed away names an expiry the lease no longer has).
  struct LeaseRef {
    std::string id;
    std::int64_t expiry = 0;
  };
  LeaseRef lease_of(std::string_view value) const;
  // What the store matches the lease `ref` by (our token, if we took it).
  store::SharedLeases::LeaseMatch match(const LeaseRef& ref) const;
  // The value that names lease `ref` at `expiry`, in this lock's form.
  std::string value_of(const LeaseRef& ref, std::int64_t expiry) const;
  store::SharedLeases::Keys keys() const;
  // The policy passed with each lease step: as Lock::step_policy.
  store::StepPolicy step_policy() const { return {m_lifetime, m_clock.is_store_clock()}; }
  std::int64_t now_seconds();
  // Why a lease step on `ref` was refused.
  Verdict why_not(const LeaseRef& ref);
  // Writes the lease `value` names to `expiry`; done, the value that names it now.
  Renewed move_lease(std::string_view value, std::int64_t expiry, util::Micros keep);

  store::Store& m_store;
  store::SharedLeases& m_shared;
  Clock& m_clock;
  std::string m_key;
  std::string m_fence_key;
  std::string m_queue_key;
  std::string m_leases_key;
  int m_slots = 0;
  int m_slot = 0;
  // How long the keys of this lock's last lease write are kept (lifetime_for),
  // passed with every later lease step: as Lock's.
  util::Micros m_lifetime{0};
  std::string m_id;  // a shared holder's lease id; a slot's is "#SLOT"
  std::int64_t m_fence = 0;
  Lock m_lock;  // the exclusive view of the same key: status, --force
};

}  // namespace nxlock::lock
