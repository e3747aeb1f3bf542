// EtcdMutex: what a holder does (renew, release, --hold, details, the watch on its key) and status.
#include <cmath>

#include "lock/etcd_lease_ttl.hpp"
#include "lock/etcd_mutex.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using store::etcd::Compare;
using store::etcd::PutRequest;
using util::Error;
using util::ErrorKind;
using util::Micros;
using util::wall_seconds;

}  // namespace

namespace {

std::int64_t lease_or_throw(std::string_view key, std::string_view value) {
  const auto lease = etcd_value_lease(value);
  if (!lease) {
    throw Error(ErrorKind::usage, "lock '" + util::escape(key) + "'",
                "'" + util::escape(value) +
                    "' is not a value `nxlock lock` printed on etcd (EXPIRY@LEASE)");
  }
  return *lease;
}

// Whether `key` is one of the lock's own keys, PREFIX<lease in hex> (KEY/<lease>),
// not one of a lock under it (KEY/b/<lease>), which etcd's prefix rule counts too.
bool own_key(std::string_view prefix, std::string_view key) {
  return key.size() > prefix.size() && key.starts_with(prefix) &&
         key.find_first_not_of("0123456789abcdef", prefix.size()) == std::string_view::npos;
}

// A range of `key` alone, its keys only: whether it is there, and its create revision.
store::etcd::RangeRequest key_alone(std::string key) {
  store::etcd::RangeRequest range;
  range.key = std::move(key);
  range.keys_only = true;
  return range;
}

// The lock a key of the recipe belongs to: KEY of KEY/<lease>.
std::string lock_of_key(std::string_view key) {
  return std::string(key.substr(0, key.rfind('/')));
}

}  // namespace

Verdict EtcdMutex::release(std::string_view value) {
  const std::int64_t lease = lease_or_throw(m_key, value);
  if (lease == m_lease) {
    m_holder_unsent = false;  // nobody will read them now
    m_watch.reset();  // our own revoke is no news
  } else {
    // A shell's value names a lease, and revoking it lets go of every key on it: only
    // a lease with its key under this lock's is ours to revoke here, not another
    // lock's (a value of `nxlock lock OTHER`), nor one whose key was deleted.
    if (m_kv.range(key_alone(key_of(lease))).kvs.empty()) {
      return owner() ? Verdict::held_by_other : Verdict::expired;
    }
  }
  // Revoking deletes every key attached to the lease: ours, at once, and the
  // next in line sees its DELETE.
  return revoke(lease) ? Verdict::done : Verdict::expired;
}

Kept EtcdMutex::release_after(std::string_view value, Micros not_before) {
  const Micros now = util::wall_now();
  if (not_before <= now) {
    return {release(value), {}};
  }
  const std::int64_t lease = lease_or_throw(m_key, value);
  // A lease cannot outlive its keepalives, so the key moves to a lease that
  // lasts until the hold's end; a put keeps its create revision, so it keeps
  // its place (and its fencing token). The hold ends where it ends on every
  // backend: at the end of the second it reports (expiry_holding_until), so the
  // lease, granted after `now`, lasts at least that long.
  const std::int64_t hold_until = expiry_holding_until(not_before);
  const Micros left = std::chrono::seconds(hold_until + 1) - now;
  const std::int64_t seconds = (left.count() + 999'999) / 1'000'000;
  m_holder_unsent = false;  // the put below writes them, finished
  const std::int64_t held = m_kv.grant(seconds).id;
  const std::string kept = etcd_value(hold_until, held);
  std::string details;
  if (m_holder) {
    Holder finished = *m_holder;
    finished.finished_at = wall_seconds();
    finished.fence = m_fence;
    finished.value = kept;
    details = finished.to_json();
  }
  const std::string mine = key_of(lease);
  store::etcd::TxnRequest request;
  // Our key as we put it; a shell's `unlock --hold` knows no revision: the key, if there.
  Compare ours = Compare::created_at(mine, m_rev);
  if (m_rev == 0) {
    ours.result = Compare::Result::greater;
  }
  request.compare.push_back(std::move(ours));
  request.success.emplace_back(PutRequest{mine, std::move(details), held, false});
  if (!m_kv.txn(request).succeeded) {
    revoke(held, true);
    return {Verdict::absent, {}};
  }
  m_watch.reset();
  revoke(lease, true);  // its key is on the new lease now
  return {Verdict::done, kept};
}

RenewalPlan EtcdMutex::plan_renewal(std::string_view value, std::int64_t ttl) {
  (void)value;
  return {ttl, util::wall_now(), {}};
}

Renewed EtcdMutex::renew(std::string_view value, const RenewalPlan& plan) {
  const std::int64_t ttl = plan.ttl;
  const std::int64_t lease = lease_or_throw(m_key, value);
  if (lease == m_lease && m_deleted) {
    return {Verdict::absent, {}};
  }
  send_holder();
  if (lease != m_lease) {
    // `nxlock renew` from a shell: the lease of an earlier `lock`.
    const auto ttl_now = m_kv.time_to_live(lease);
    if (!ttl_now) {
      return {Verdict::expired, {}};
    }
    check_renewal_ttl(m_kv, ttl, ttl_now->granted);
    // A lease with no key under this lock's is another lock's (or its key was deleted):
    // not ours to keep alive. (Looked at again after the keepalive, below.)
    if (m_kv.range(key_alone(key_of(lease))).kvs.empty()) {
      return {Verdict::absent, {}};
    }
  }
  const std::int64_t granted = m_kv.keep_alive(lease);
  if (granted <= 0) {
    return {Verdict::expired, {}};  // the lease is gone: so is every key attached to it
  }
  // The key itself, after the keepalive, at every renewal (a linearizable read,
  // whichever member answers): the keepalive confirms the lease alone, and the
  // watch says nothing while its member is frozen or cut off from us, when the
  // keepalives go through another member. The renewal is done only once both are
  // confirmed, and the job's deadline moves only then (run/renewal.cpp).
  const store::etcd::RangeResult own = m_kv.range(key_alone(key_of(lease)));
  if (own.kvs.empty() ||
      (lease == m_lease && m_rev != 0 && own.kvs.front().create_revision != m_rev)) {
    return {Verdict::absent, {}};
  }
  const std::int64_t answered = own.header.member_id;
  if (m_watch && lease == m_lease && m_watch->member_id() != 0 && answered != 0 &&
      m_watch->member_id() != answered) {
    // The calls failed over from the watch's member (it hung, or lost its leader):
    // its silence says nothing, so the watch goes where the renewal was answered.
    util::trace("etcd: the watch's member did not answer the renewal: watching through another");
    m_watch.reset();
  }
  if (lease == m_lease && m_fence != 0 && !m_watch) {
    // A watch from there: a DELETE between renewals makes the next one come at once.
    try {
      m_watch = m_kv.watch(key_of(lease), own.header.revision + 1);
    } catch (const Error& e) {
      util::trace(std::string("etcd: no watch on the lock's key: ") + e.what());
    }
  }
  return {Verdict::done, value_of(lease, std::min(granted, ttl))};
}

int EtcdMutex::loss_fd() {
  if (m_fence == 0 || m_deleted) {
    return -1;
  }
  send_holder();
  if (!m_watch && !m_watch_tried) {
    m_watch_tried = true;  // later ones come with renew(), after a look at the key
    try {
      m_watch = m_kv.watch(key_of(m_lease), m_rev + 1);
    } catch (const Error& e) {
      util::trace(std::string("etcd: no watch on the lock's key: ") + e.what());
    }
  }
  return m_watch ? m_watch->fd() : -1;
}

bool EtcdMutex::lost() {
  if (!m_watch) {
    return false;
  }
  const store::etcd::WatchNews news = m_watch->take();
  if (news.deleted) {
    m_deleted = true;
    util::trace("etcd: the lock's key was deleted");
    return true;
  }
  if (news.ended) {
    util::trace("etcd: the watch on the lock's key ended: " + news.why);
    m_watch.reset();  // renew() looks at the key and watches again
    return true;
  }
  return false;
}

void EtcdMutex::record_holder(Holder holder) {
  m_holder = std::move(holder);
  m_holder_unsent = true;
}

void EtcdMutex::send_holder() {
  if (!m_holder_unsent || !m_holder || m_lease == 0 || m_rev == 0) {
    return;
  }
  m_holder_unsent = false;
  // Only on our own key (a txn on its create revision), never one made since;
  // nobody waits for the answer: the details are advisory. They carry the token,
  // which the key's revisions no longer tell once they are written.
  Holder details = *m_holder;
  details.fence = m_fence;
  const std::string mine = key_of(m_lease);
  store::etcd::TxnRequest request;
  request.compare.push_back(Compare::created_at(mine, m_rev));
  request.success.emplace_back(PutRequest{mine, details.to_json(), m_lease, false});
  m_kv.txn_later(request);
}

std::optional<Holder> EtcdMutex::holder_of(std::string_view value) {
  const auto lease = etcd_value_lease(value);
  if (!lease) {
    return std::nullopt;
  }
  try {
    for (const auto& kv : m_store.range_prefix(m_prefix).kvs) {
      if (kv.lease == *lease) {
        return Holder::from_json(kv.value);
      }
    }
  } catch (const Error& e) {
    util::trace(std::string("etcd: holder details not read: ") + e.what());
  }
  return std::nullopt;
}

Removal EtcdMutex::force_release() {
  // The details are the key's own value: they go with it, never a problem apart.
  const auto holder = owner();
  if (!holder) {
    return {};
  }
  if (!own_key(m_prefix, holder->kv.key)) {
    // A lock under ours holds: not ours to release (our own keys only wait).
    Removal removal;
    removal.held_under = lock_of_key(holder->kv.key);
    return removal;
  }
  Removal removal;
  removal.removed = m_kv.remove({holder->kv.key}).deleted > 0;
  return removal;
}

std::vector<std::pair<std::string, std::string>> EtcdMutex::job_environment() const {
  if (m_fence == 0 || m_lease == 0) {
    return {};
  }
  return {{"ETCD_LOCK_KEY", key_of(m_lease)}, {"ETCD_LOCK_REV", std::to_string(m_fence)}};
}

Status EtcdMutex::status() {
  Status status;
  status.now_seconds = wall_seconds();
  const auto holder = owner();
  if (!holder || !own_key(m_prefix, holder->kv.key)) {
    // A lock under ours that holds is not our holder, though a taker of ours waits for it.
    status.state = Status::State::free;
    if (holder) {
      status.held_under = lock_of_key(holder->kv.key);
    }
    return status;
  }
  status.state = Status::State::held;
  status.fence = etcd_token(holder->kv);
  status.holder = Holder::from_json(holder->kv.value);
  std::int64_t left = 0;
  if (holder->kv.lease != 0) {
    if (const auto ttl = m_kv.time_to_live(holder->kv.lease)) {
      left = ttl->left;
      status.granted_ttl = ttl->granted;
    }
  }
  status.expires_at = etcd_shown_expiry(status.now_seconds, left, holder->kv.lease, status.holder);
  status.value = etcd_value(status.expires_at, holder->kv.lease);
  return status;
}

}  // namespace nxlock::lock
