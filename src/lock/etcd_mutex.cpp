// EtcdMutex: taking etcd's lock (grant, one txn; the wait is etcd_mutex_wait.cpp) and giving up cleanly.
#include "lock/etcd_mutex.hpp"

#include <algorithm>
#include <charconv>

#include "lock/queue_ticket.hpp"
#include "store/etcd/etcd_json.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using nlohmann::json;
using store::etcd::base64_encode;
using store::etcd::int_field;
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

std::optional<std::int64_t> etcd_token(const store::EtcdKeyValue& holder) {
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
    : m_store(store), m_client(store.client()), m_key(std::move(key)), m_prefix(m_key + "/") {}

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

std::optional<EtcdMutex::Owner> EtcdMutex::owner() {
  const json answer = m_client.call(
      "/v3/kv/range", {{"key", base64_encode(m_prefix)},
                       {"range_end", base64_encode(store::etcd::prefix_end(m_prefix))},
                       {"sort_order", "ASCEND"},
                       {"sort_target", "CREATE"},
                       {"limit", 1}});
  const auto kvs = answer.value("kvs", json::array());
  if (kvs.empty()) {
    return std::nullopt;
  }
  return Owner{store::key_value_of(kvs.front(), m_key),
               int_field(answer.value("header", json::object()), "revision", m_key)};
}

std::optional<EtcdMutex::Owner> EtcdMutex::predecessor() {
  const json answer = m_client.call(
      "/v3/kv/range", {{"key", base64_encode(m_prefix)},
                       {"range_end", base64_encode(store::etcd::prefix_end(m_prefix))},
                       {"max_create_revision", std::to_string(m_rev - 1)},
                       {"sort_order", "DESCEND"},
                       {"sort_target", "CREATE"},
                       {"limit", 1}});
  const auto kvs = answer.value("kvs", json::array());
  if (kvs.empty()) {
    return std::nullopt;
  }
  return Owner{store::key_value_of(kvs.front(), m_key),
               int_field(answer.value("header", json::object()), "revision", m_key)};
}

std::optional<std::pair<std::int64_t, std::int64_t>> EtcdMutex::time_to_live(std::int64_t lease) {
  const json answer = m_client.call("/v3/lease/timetolive", {{"ID", std::to_string(lease)}});
  const std::int64_t left = int_field(answer, "TTL", m_key);
  if (left < 0) {
    return std::nullopt;
  }
  return std::make_pair(left, int_field(answer, "grantedTTL", m_key));
}

std::int64_t EtcdMutex::keep_alive(std::int64_t lease) {
  const json answer = m_client.call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}});
  return int_field(answer.value("result", json::object()), "TTL", m_key);
}

bool EtcdMutex::revoke(std::int64_t lease, bool quietly) {
  try {
    return m_client
        .call_unless("/v3/lease/revoke", {{"ID", std::to_string(lease)}},
                     store::etcd::Code::not_found)
        .has_value();
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
    const auto ttl = holder->kv.lease != 0 ? time_to_live(holder->kv.lease) : std::nullopt;
    const std::int64_t left = ttl ? ttl->first : 0;
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
      const json grant = m_client.call("/v3/lease/grant", {{"TTL", ttl}});
      const std::int64_t lease = int_field(grant, "ID", m_key);
      if (lease == 0) {
        throw Error(ErrorKind::unavailable, m_client.name(),
                    "no lease granted: " + grant.value("error", std::string("no reason given")));
      }
      m_lease = lease;
      m_granted = int_field(grant, "TTL", m_key);
      m_last_sent = sent;
    }
    const std::string mine = key_of(m_lease);
    const json owner_range = {{"key", base64_encode(m_prefix)},
                              {"range_end", base64_encode(store::etcd::prefix_end(m_prefix))},
                              {"sort_order", "ASCEND"},
                              {"sort_target", "CREATE"},
                              {"limit", 1}};
    // One txn: our key if it is not there yet (a retried txn finds it), and the holder.
    const auto txn = m_client.call_unless(
        "/v3/kv/txn",
        {{"compare", json::array({{{"key", base64_encode(mine)},
                                   {"target", "CREATE"},
                                   {"result", "EQUAL"},
                                   {"create_revision", "0"}}})},
         {"success", json::array({{{"request_put",
                                    {{"key", base64_encode(mine)},
                                     // Who waits, for list --waiters, until it holds.
                                     {"value", base64_encode(make_ticket(WaiterKind::exclusive))},
                                     {"lease", std::to_string(m_lease)}}}},
                                  {{"request_range", owner_range}}})},
         {"failure", json::array({{{"request_range", {{"key", base64_encode(mine)}}}},
                                  {{"request_range", owner_range}}})}},
        store::etcd::Code::not_found);
    if (!txn) {
      m_lease = 0;  // "requested lease not found": it lapsed, its keys with it
      continue;
    }
    const auto responses = txn->value("responses", json::array());
    const auto range_of = [&](std::size_t i) {
      if (responses.size() <= i) {
        throw Error(ErrorKind::internal, m_key, "unexpected answer from etcd (txn)");
      }
      return responses[i].value("response_range", json::object()).value("kvs", json::array());
    };
    if (txn->value("succeeded", false)) {
      m_rev = int_field(txn->value("header", json::object()), "revision", m_key);
    } else {
      const auto own = range_of(0);
      if (own.empty()) {
        throw Error(ErrorKind::internal, m_key, "unexpected answer from etcd (txn)");
      }
      m_rev = store::key_value_of(own.front(), m_key).create_revision;
    }
    Joined joined;
    joined.fresh = txn->value("succeeded", false);
    const auto holders = range_of(1);
    if (!holders.empty()) {
      joined.holder = Owner{store::key_value_of(holders.front(), m_key), m_rev};
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
    if (!holding) {
      WaitEnd end = WaitEnd::gave_up;
      if (!policy.wait_for || *policy.wait_for > Micros(0)) {
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
