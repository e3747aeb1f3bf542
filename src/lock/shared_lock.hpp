// SharedLock: a shared holder of a lock (--shared, as flock -s): any number of them
// hold the lock at once, or one exclusive holder (Lock) does.
//
// Each shared holder has a lease beside the lock (store::SharedLeases); while
// one lives, the lock key holds the latest lease's expiry, so exclusive takers
// of every kind find the lock held. A shared holder's value, what `lock
// --shared` prints and unlock/renew take, is "EXPIRY:ID": the lease's expiry
// (a lock value) and the lease's own id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lock/clock.hpp"
#include "lock/lock.hpp"
#include "store/store.hpp"

namespace nxlock::lock {

// Whether `value` is a shared holder's value ("EXPIRY:ID"), not a lock value.
bool is_shared_value(std::string_view value);

// A live shared holder as `status` and `list` show it, from its lease and the
// details it recorded beside it ("TOKEN HOLDER-JSON", SharedLock::record_holder).
struct SharedHolderView {
  std::string value;  // "EXPIRY:ID", what unlock/renew take
  std::int64_t expires_at = 0;
  std::optional<std::int64_t> fence;  // its token, once it recorded its details
  std::optional<Holder> holder;
};
SharedHolderView view_shared_holder(const store::SharedHolder& lease);

class SharedLock final : public Lockable {
 public:
  // `key` is the full store key. Throws util::Error(usage) for a key named
  // like another lock's companion, or a backend that keeps no shared leases.
  SharedLock(store::Store& store, Clock& clock, std::string key);

  const std::string& key() const override { return m_key; }
  std::int64_t fence() const override { return m_fence; }

  // Takes a lease, waiting as the policy says: while an exclusive holder holds
  // the key, or (writer preference) an earlier waiter is first in the queue.
  // A waiter queues as Lock's do, so a shared waiter behind an exclusive one
  // waits for it, and shared waiters woken in turn come along together.
  // Throws util::Error(data) if the key holds something that is not a timestamp.
  AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) override;

  // Gives up the lease `value` names; the last live one frees the key and wakes
  // its waiters. Throws util::Error(usage) if `value` is not a shared value.
  Verdict release(std::string_view value) override;

  // release(), but while `not_before` is ahead the lease is kept until then.
  Verdict release_after(std::string_view value, util::Micros not_before,
                        std::string& kept_value) override;

  // Moves the lease's expiry to now + ttl + 1, if it still lives.
  Verdict renew(std::string_view value, std::int64_t ttl, std::string& new_value) override;

  // Records who holds the lease, with its token, beside the lease (traced, never thrown).
  void record_holder(Holder holder) override;
  // The exclusive holder's details, for a shared taker that found one.
  std::optional<Holder> holder_of(std::string_view value) override {
    return read_holder(m_store, m_key, value);
  }
  bool force_release(std::optional<std::string>& holder_problem) override {
    return m_lock.force_release(holder_problem);
  }
  Status status() override { return m_lock.status(); }
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_store.set_deadline(monotonic_deadline);
  }

 private:
  std::int64_t now_seconds();
  // Writes the lease to `expiry`; the verdict, and the new value in `new_value`.
  Verdict move_lease(std::string_view value, std::int64_t expiry, util::Micros keep,
                     std::string& new_value);

  store::Store& m_store;
  store::SharedLeases& m_shared;
  Clock& m_clock;
  std::string m_key;
  std::string m_fence_key;
  std::string m_queue_key;
  std::string m_leases_key;
  std::string m_id;  // this holder's lease
  std::int64_t m_fence = 0;
  Lock m_lock;  // the exclusive view of the same key: status, --force
};

}  // namespace nxlock::lock
