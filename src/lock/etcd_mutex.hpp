// EtcdMutex: the lock as etcd's own recipe (clientv3/concurrency's Mutex), key for key.
//
// So that nxlock, `etcdctl lock KEY` and any Go program's concurrency.Mutex on
// KEY exclude each other and queue together (man page, ETCD):
//   - a lease is granted for the ttl (etcd may grant more);
//   - one txn puts KEY/<lease id in lowercase hex>, attached to the lease, if
//     its create revision is 0;
//   - the holder is the key with the lowest create revision under KEY/;
//   - a waiter watches only the key just before its own and, after its
//     DELETE, looks again; its own key must still exist.
// The value nxlock prints and unlock/renew take is "EXPIRY@LEASE": the Unix
// second through which the lock is surely held, and the lease in hex. The
// fencing token is the revision of a write the holder made as its hold began:
// the put of its key when it was first at once (its create revision), else a
// put on its key guarded by that key's create revision and lease, made once no
// key is before it. So it is above the token of every earlier holder, nxlock's
// or `etcdctl lock`'s (ETCD_LOCK_REV, a revision read as its hold began), and
// no two holds share it. nxlock's keys hold the waiter's ticket (list
// --waiters), then k_etcd_held from the put that began a waiter's hold, until
// the holder's details (with the token) replace it; an empty value is another
// client's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lock/lock.hpp"
#include "lock/lockable.hpp"
#include "store/etcd/etcd_store.hpp"
#include "store/etcd/etcd_watch.hpp"

namespace nxlock::lock {

// The value "EXPIRY@LEASE" of a lock on etcd (the lease in hex).
std::string etcd_value(std::int64_t expiry, std::int64_t lease);

// What an nxlock key holds from the put that began a waiter's hold until the
// holder's details replace it.
inline constexpr std::string_view k_etcd_held = "nxlock";

// The token of the hold of `holder` (the key with the lowest create revision):
// its details' token, or the revision of its last put while it holds
// k_etcd_held or its ticket; nullopt for another client's key (`etcdctl
// lock`: unknown).
std::optional<std::int64_t> etcd_token(const store::etcd::KeyValue& holder);

// The lease a value "EXPIRY@LEASE" names; nullopt if it names none.
std::optional<std::int64_t> etcd_value_lease(std::string_view value);

// The EXPIRY that a held lock's value shows, for a lease with `ttl_left` whole seconds
// left: now plus those, unless the holder's record names a value of the same lease
// within the two seconds that rounding the lease's TTL moves it by. That value is the
// one lock or run-locked printed (or --hold reported), and status and list show it too.
std::int64_t etcd_shown_expiry(std::int64_t now_seconds, std::int64_t ttl_left,
                               std::int64_t lease, const std::optional<Holder>& recorded);

class EtcdMutex final : public Lockable, private HeldNews {
 public:
  // `key` is the full key (prefix included); the recipe's keys are under `key`/.
  EtcdMutex(store::EtcdStore& store, std::string key);
  ~EtcdMutex() override;
  EtcdMutex(const EtcdMutex&) = delete;
  EtcdMutex& operator=(const EtcdMutex&) = delete;

  const std::string& key() const override { return m_key; }
  std::int64_t fence() const override { return m_fence; }

  // Grants the lease, queues its key and waits for the keys before it to go.
  // A backend that fails while it waits (a failover, a frozen member, a lost
  // quorum) is waited out until the wait's end, the place in line kept while
  // the lease lives and taken again at the line's end when it does not; one
  // that fails before the key is queued throws at once. A waiter that gives up
  // (-n, the end of -w, a signal, the backend still failing at the wait's end)
  // revokes its lease before it returns, or it would hold the lock for a TTL.
  AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) override;
  // Revokes the lease `value` names (its key goes with it).
  Verdict release(std::string_view value) override;
  // --hold: while `not_before` is ahead, the key moves to a new lease that
  // lasts until then (its create revision, its place, stays), and the old one is revoked.
  Kept release_after(std::string_view value, util::Micros not_before) override;
  // A keepalive writes no value: the plan has none (a lost reply leaves no value to try).
  RenewalPlan plan_renewal(std::string_view value, std::int64_t ttl) override;
  // A keepalive of the lease. A lease answered with no TTL is gone (expired);
  // a DELETE of the key seen on its watch, or the key not found, is absent.
  // Throws util::Error(usage) when the plan's ttl is not the lease's: a lease's
  // TTL cannot change. Done, the value names the lease and the TTL it was granted.
  Renewed renew(std::string_view value, const RenewalPlan& plan) override;
  using Lockable::renew;
  // The details go in the key's own value (a txn, not waited for), with the
  // holder's next step: its watch (loss_fd), a renewal, or its end while it
  // holds (`lock`). A job that ends at once never sends them: its release
  // follows, and each write waits for a quorum's fsync.
  void record_holder(Holder holder) override;
  // The value names the hold's own lease, which no other take is granted: a
  // release revokes it and nothing else.
  void resume(std::string_view, std::int64_t, std::int64_t) override {}
  std::optional<Holder> holder_of(std::string_view value) override;
  // Deletes the holder's key (the lowest create revision): the next in line goes.
  Removal force_release() override;
  Status status() override;
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_store.set_deadline(monotonic_deadline);
  }
  // The keys before ours, by create revision (waiters_ahead()).
  std::string waiters_uncounted() const override { return ""; }
  // ETCD_LOCK_KEY and ETCD_LOCK_REV, as `etcdctl lock` gives its command.
  std::vector<std::pair<std::string, std::string>> job_environment() const override;
  // The watch on the holder's key, and its details sent once the job settled.
  HeldNews* held_news() override { return this; }

 private:
  int loss_fd() override;
  bool lost() override;
  void job_settled() override { send_holder(); }

  // Sends what record_holder() kept, if the lock is still ours.
  void send_holder();

  struct Owner {
    store::etcd::KeyValue kv;
    std::int64_t revision = 0;  // the revision the range was read at
  };
  // The range of the key with the lowest create revision under KEY/: the holder.
  store::etcd::RangeRequest first_in_line() const;
  // The key with the lowest create revision under KEY/, if any.
  std::optional<Owner> owner();
  // The key just before ours (highest create revision below ours), if any.
  std::optional<Owner> predecessor();
  // The waiters with keys before ours (the first of them is the holder, or on
  // its way to hold), counted up to `most`; a dead waiter's key is gone with
  // its lease.
  std::int64_t waiters_ahead(std::int64_t most);
  // KEY/<lease in hex>
  std::string key_of(std::int64_t lease) const;
  std::string value_of(std::int64_t lease, std::int64_t ttl_left) const;
  // Revokes; false if the lease was already gone. Best effort when `quietly`.
  bool revoke(std::int64_t lease, bool quietly = false);
  // The busy answer for the holder `owner`.
  AcquireResult busy(const std::optional<Owner>& holder);
  // Puts our key in line, with a lease granted first if we have none (or ours
  // lapsed): sets m_lease, m_granted, m_rev (and m_last_sent with a grant).
  // The holder is the key with the lowest create revision; first if it is ours.
  struct Joined {
    bool first = false;
    bool fresh = false;  // our key was put by this txn (not found there)
    std::optional<Owner> holder;
  };
  Joined join(std::int64_t ttl);
  // Revokes our lease (best effort), if any: out of line.
  void give_up_place();
  // Waits until no key is before ours (etcd_mutex_wait.cpp).
  enum class WaitEnd { first, gave_up, interrupted };
  WaitEnd wait_turn(std::int64_t ttl, const WaitPolicy& policy, util::Micros began);
  // A waiter's keepalive; false if the lease is gone (then out of line: m_rev is 0).
  bool keep_place();
  // The put that begins our hold, guarded by our key's create revision and
  // lease: sets m_fence to its revision. False if the key is gone (then out of line).
  bool take_turn();

  store::EtcdStore& m_store;
  store::etcd::EtcdKv& m_kv;
  std::string m_key;
  std::string m_prefix;             // m_key + "/"
  std::int64_t m_lease = 0;         // ours, once granted
  std::int64_t m_granted = 0;       // its TTL as granted
  std::int64_t m_rev = 0;           // our key's create revision
  std::int64_t m_fence = 0;         // our token, once we hold the lock
  util::Micros m_last_sent{0};      // the last confirmed keepalive (or the grant) was sent then
  std::unique_ptr<store::etcd::EtcdWatch> m_watch;  // on our key while we hold it
  bool m_deleted = false;           // the watch saw our key's DELETE
  bool m_watch_tried = false;       // loss_fd() opened (or tried) the first watch
  std::optional<Holder> m_holder;   // what record_holder() wrote
  bool m_holder_unsent = false;     // ... and has not sent yet (send_holder())
};

}  // namespace nxlock::lock
