// EtcdMutex: taking etcd's lock (grant, one txn; the wait is etcd_mutex_wait.cpp) and giving up cleanly.
#include "lock/etcd_mutex.hpp"

#include <algorithm>
#include <charconv>

#include "lock/queue_ticket.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using store::etcd::Compare;
using store::etcd::RangeRequest;
using util::Error;
using util::ErrorKind;
using util::Micros;
using util::wall_seconds;

}  // namespace

std::optional<std::int64_t> etcd_value_lease(std::string_view value) {
  const auto at = value.find('@');
  if (at == std::string_view::npos || at + 1 >= value.size() || value.size() - at - 1 > 16) {
    return std::nullopt;
  }
  std::uint64_t lease = 0;
  const char* first = value.data() + at + 1;
  const char* last = value.data() + value.size();
  const auto [end, ec] = std::from_chars(first, last, lease, 16);
  if (ec != std::errc() || end != last || lease == 0) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(lease);
}

std::string etcd_value(std::int64_t expiry, std::int64_t lease) {
  return std::to_string(expiry) + "@" + store::etcd::lease_hex(lease);
}

std::optional<std::int64_t> etcd_token(const store::etcd::KeyValue& holder) {
  if (holder.value == k_etcd_held || details_of_ticket(holder.value)) {
    // The put that began the hold (a waiter's ticket, when it was first at
    // once): the details are not there yet.
    return holder.mod_revision;
  }
  const auto details = Holder::from_json(holder.value);
  if (!details) {
    return std::nullopt;  // another client's key: `etcdctl lock` tells its command alone
  }
  // An older nxlock's details name no token: its token was the key's create revision.
  return details->fence > 0 ? details->fence : holder.create_revision;
}

std::int64_t etcd_shown_expiry(std::int64_t now_seconds, std::int64_t ttl_left,
                               std::int64_t lease, const std::optional<Holder>& recorded) {
  const std::int64_t computed = now_seconds + std::max<std::int64_t>(ttl_left, 0);
  if (!recorded || etcd_value_lease(recorded->value) != lease) {
    return computed;
  }
  std::int64_t shown = 0;
  const std::string_view value = recorded->value;
  const char* at = value.data() + value.find('@');  // there: the value names a lease
  const auto [end, ec] = std::from_chars(value.data(), at, shown);
  if (ec != std::errc() || end != at || shown < computed - 1 || shown > computed + 2) {
    return computed;  // renewed since it was printed, or not ours to believe
  }
  return shown;
}

EtcdMutex::EtcdMutex(store::EtcdStore& store, std::string key)
    : m_store(store), m_kv(store.kv()), m_key(std::move(key)), m_prefix(m_key + "/") {}

EtcdMutex::~EtcdMutex() {
  // Still held as the process ends (`lock`): its details go now (the client
  // waits for the answer before it closes).
  try {
    send_holder();
  } catch (const Error& e) {
    util::trace(std::string("etcd: holder details not recorded: ") + e.what());
  }
}

std::string EtcdMutex::key_of(std::int64_t lease) const {
  return m_prefix + store::etcd::lease_hex(lease);
}

std::string EtcdMutex::value_of(std::int64_t lease, std::int64_t ttl_left) const {
  return etcd_value(wall_seconds() + std::max<std::int64_t>(ttl_left, 0), lease);
}

RangeRequest EtcdMutex::first_in_line() const {
  RangeRequest range = RangeRequest::prefix(m_prefix);
  range.sort = RangeRequest::Sort::create_ascending;
  range.limit = 1;
  return range;
}

std::optional<EtcdMutex::Owner> EtcdMutex::owner() {
  store::etcd::RangeResult answer = m_kv.range(first_in_line());
  if (answer.kvs.empty()) {
    return std::nullopt;
  }
  return Owner{std::move(answer.kvs.front()), answer.header.revision};
}

std::optional<EtcdMutex::Owner> EtcdMutex::predecessor() {
  RangeRequest range = RangeRequest::prefix(m_prefix);
  range.max_create_revision = m_rev - 1;
  range.sort = RangeRequest::Sort::create_descending;
  range.limit = 1;
  store::etcd::RangeResult answer = m_kv.range(range);
  if (answer.kvs.empty()) {
    return std::nullopt;
  }
  return Owner{std::move(answer.kvs.front()), answer.header.revision};
}

std::int64_t EtcdMutex::waiters_ahead(std::int64_t most) {
  RangeRequest range = RangeRequest::prefix(m_prefix);
  range.max_create_revision = m_rev - 1;
  range.sort = RangeRequest::Sort::create_ascending;
  range.keys_only = true;
  range.limit = most + 1;  // the holder, and enough to tell
  const auto keys = static_cast<std::int64_t>(m_kv.range(range).kvs.size());
  return std::max<std::int64_t>(0, keys - 1);
}

bool EtcdMutex::revoke(std::int64_t lease, bool quietly) {
  try {
    return m_kv.revoke(lease);
  } catch (const Error& e) {
    if (!quietly) {
      throw;
    }
    // The lease then lapses by its TTL; a waiter's key goes with it.
    util::trace(std::string("etcd: lease not revoked: ") + e.what());
    return false;
  }
}

AcquireResult EtcdMutex::busy(const std::optional<Owner>& holder) {
  AcquireResult result;
  result.outcome = AcquireResult::Outcome::busy;
  result.now_seconds = wall_seconds();
  if (holder) {
    const auto ttl = holder->kv.lease != 0 ? m_kv.time_to_live(holder->kv.lease) : std::nullopt;
    const std::int64_t left = ttl ? ttl->left : 0;
    result.held_until = etcd_shown_expiry(result.now_seconds, left, holder->kv.lease,
                                          Holder::from_json(holder->kv.value));
    result.held_value = etcd_value(result.held_until, holder->kv.lease);
  }
  return result;
}

EtcdMutex::Joined EtcdMutex::join(std::int64_t ttl) {
  // A lease granted just now may be gone by the txn only if it lapsed in between
  // (a frozen member's answer): one more grant, then the failure is said.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (m_lease == 0) {
      const Micros sent = util::mono_now();
      const store::etcd::Lease grant = m_kv.grant(ttl);
      m_lease = grant.id;
      m_granted = grant.ttl;
      m_last_sent = sent;
    }
    const std::string mine = key_of(m_lease);
    // One txn: our key if it is not there yet (a retried txn finds it), and the holder.
    store::etcd::TxnRequest request;
    request.compare.push_back(Compare::created_at(mine, 0));
    // Who waits, for list --waiters, until it holds.
    request.success.emplace_back(
        store::etcd::PutRequest{mine, make_ticket(WaiterKind::exclusive), m_lease, false});
    request.success.emplace_back(first_in_line());
    RangeRequest own;
    own.key = mine;
    request.failure.emplace_back(std::move(own));
    request.failure.emplace_back(first_in_line());
    auto txn = m_kv.txn_if_lease_lives(request);
    if (!txn) {
      m_lease = 0;  // "requested lease not found": it lapsed, its keys with it
      continue;
    }
    if (txn->succeeded) {
      m_rev = txn->header.revision;
    } else {
      const auto& found = txn->responses[0].kvs;
      if (found.empty()) {
        throw Error(ErrorKind::internal, m_key, "unexpected answer from etcd (txn)");
      }
      m_rev = found.front().create_revision;
    }
    Joined joined;
    joined.fresh = txn->succeeded;
    auto& holders = txn->responses[1].kvs;
    if (!holders.empty()) {
      joined.holder = Owner{std::move(holders.front()), m_rev};
      joined.first = joined.holder->kv.create_revision == m_rev;
    }
    return joined;
  }
  throw Error(ErrorKind::unavailable, m_key, "the lease granted was gone before its key was put");
}

AcquireResult EtcdMutex::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  const Micros began = util::mono_now();
  AcquireResult result;
  try {
    // A first call that fails is a wrong URL or a dead cluster: said at once.
    const Joined joined = join(ttl);
    // First at once, our key's put begins the hold: its revision is the token. A
    // key found there (a txn retried after a lost answer) was put before we knew
    // we were first: the hold begins with a put of its own.
    bool holding = joined.first && joined.fresh;
    if (holding) {
      m_fence = m_rev;
    } else if (joined.first) {
      holding = take_turn();
    }
    const bool waits = !policy.wait_for || *policy.wait_for > Micros(0);
    if (!holding && waits && policy.max_waiters > 0) {
      // Counted after our key's put: arrival order is create revision, and
      // every key before ours is there already (or gone for good).
      const std::int64_t ahead = waiters_ahead(policy.max_waiters);
      if (ahead >= policy.max_waiters) {
        result.outcome = AcquireResult::Outcome::crowded;
        result.waiters_ahead = ahead;
        give_up_place();
        return result;
      }
    }
    if (!holding) {
      WaitEnd end = WaitEnd::gave_up;
      if (waits) {
        end = wait_turn(ttl, policy, began);
      }
      if (end != WaitEnd::first) {
        if (end == WaitEnd::gave_up) {
          result = busy(policy.wait_for == Micros(0) ? joined.holder : owner());
        } else {
          result.outcome = AcquireResult::Outcome::interrupted;
        }
        give_up_place();
        return result;
      }
    }
  } catch (...) {
    give_up_place();
    throw;
  }
  result.outcome = AcquireResult::Outcome::acquired;
  result.value = value_of(m_lease, std::min(ttl, m_granted));
  result.valid_from = m_last_sent;
  result.fence = m_fence;
  return result;
}

void EtcdMutex::give_up_place() {
  if (m_lease != 0) {
    revoke(m_lease, true);
  }
  m_lease = 0;
  m_rev = 0;
}

}  // namespace nxlock::lock
