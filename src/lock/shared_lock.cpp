// SharedLock: a shared holder's lease, taken, renewed and given up over store::SharedLeases.
#include "lock/shared_lock.hpp"

#include <algorithm>
#include <cstdio>

#include "lock/keys.hpp"
#include "lock/queue_ticket.hpp"
#include "lock/wait_loop.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/random.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::Micros;

// A lease id: "s" and 16 hex digits, unique among the holders of one key.
std::string make_lease_id() {
  char text[24];
  std::snprintf(text, sizeof text, "s%016llx", static_cast<unsigned long long>(util::random_u64()));
  return text;
}

struct SharedValue {
  std::int64_t expiry = 0;
  std::string_view id;
};

std::optional<SharedValue> parse_shared_value(std::string_view value) {
  const auto colon = value.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  const auto expiry = store::parse_lock_timestamp(value.substr(0, colon));
  const std::string_view id = value.substr(colon + 1);
  const bool id_ok = id.size() == 17 && id[0] == 's' &&
                     id.find_first_not_of("0123456789abcdef", 1) == std::string_view::npos;
  if (!expiry || !id_ok) {
    return std::nullopt;
  }
  return SharedValue{*expiry, id};
}

// A value given to unlock/renew: throws util::Error(usage) if it is not a shared one.
SharedValue parse_or_throw(std::string_view key, std::string_view value) {
  const auto lease = parse_shared_value(value);
  if (!lease) {
    throw util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'",
                      "'" + util::escape(value, 40) +
                          "' is not a shared holder's value (the text `lock --shared` printed)");
  }
  return *lease;
}

std::string shared_value(std::int64_t expiry, std::string_view id) {
  return std::to_string(expiry) + ":" + std::string(id);
}

store::SharedLeases& leases_of(store::Store& store, std::string_view key) {
  store::SharedLeases* shared = store.shared();
  if (shared == nullptr) {
    throw util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'",
                      "--shared is not available on " + store.describe());
  }
  return *shared;
}

}  // namespace

bool is_shared_value(std::string_view value) {
  return parse_shared_value(value).has_value();
}

SharedHolderView view_shared_holder(const store::SharedHolder& lease) {
  SharedHolderView view;
  view.value = shared_value(lease.expiry, lease.id);
  view.expires_at = lease.expiry;
  if (lease.details) {
    const std::string_view details = *lease.details;
    const auto space = details.find(' ');
    if (space != std::string_view::npos) {
      view.fence = store::parse_fence(details.substr(0, space));
      view.holder = Holder::from_json(details.substr(space + 1));
    }
  }
  return view;
}

SharedLock::SharedLock(store::Store& store, Clock& clock, std::string key)
    : m_store(store),
      m_shared(leases_of(store, key)),
      m_clock(clock),
      m_key(key),
      m_fence_key(fence_key(m_key)),
      m_queue_key(queue_key(m_key)),
      m_leases_key(shared_key(m_key)),
      m_id(make_lease_id()),
      m_lock(store, clock, std::move(key)) {}

std::int64_t SharedLock::now_seconds() {
  return util::whole_seconds(m_clock.now());
}

AcquireResult SharedLock::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  const bool waiting = !policy.wait_for || *policy.wait_for > Micros(0);
  std::optional<QueueTicket> ticket;
  if (store::WaitersQueue* waiters = m_store.queue()) {
    ticket.emplace(*waiters, m_key, m_queue_key, WaiterKind::shared);
  }
  std::unique_ptr<store::Watcher> watcher;

  WaitSteps steps;
  steps.look = [&] {
    // As Lock::try_once: one clock reading for the value and the decision.
    const Micros before = util::mono_now();
    const std::int64_t now = now_seconds();
    const Micros valid_from = std::min(before, util::mono_now() - m_clock.lag());
    const std::int64_t expiry = expiry_for(now, ttl);
    m_store.keep_keys_for(lifetime_for(std::chrono::seconds(ttl)));
    if (ticket) {
      ticket->joined(waiting);  // before the step: see Lock::acquire
    }
    const auto step =
        m_shared.take(m_key, m_fence_key, m_leases_key, m_id, expiry, m_queue_key,
                      ticket ? ticket->ticket() : std::string(), waiting, k_queue_lease);
    Look look;
    look.now_seconds = now;
    if (step.outcome == store::SharedLeases::Take::Outcome::taken) {
      if (ticket) {
        ticket->joined(false);  // the step left the queue
      }
      m_fence = step.fence.value_or(0);
      look.found = Look::Found::acquired;
      look.taken = taken_with(shared_value(expiry, m_id), now, valid_from, m_fence);
      return look;
    }
    look.found = Look::Found::busy;
    look.behind = step.outcome == store::SharedLeases::Take::Outcome::behind;
    if (step.current) {
      const auto held_until = store::parse_lock_timestamp(*step.current);
      if (!held_until) {
        throw util::Error(util::ErrorKind::data, "lock '" + util::escape(m_key) + "'",
                          "holds '" + util::escape(*step.current, 40) +
                              "', not a lock timestamp; refusing to break it");
      }
      look.held_until = *held_until;
      // Held past its timestamp (the embedded store's live owner): a poll tick decides.
      if (*held_until >= now) {
        look.wake_at = *held_until;
      }
    }
    return look;
  };
  watch_key(steps, m_store, m_key, ticket, watcher);
  return wait_for_lock(policy, m_clock, steps);
}

void SharedLock::record_holder(Holder holder) {
  try {
    if (!m_shared.describe(m_leases_key, m_id, std::to_string(m_fence) + " " + holder.to_json())) {
      util::trace("shared holder details not recorded: the lease of " + util::escape(m_key) +
                  " is gone");
    }
  } catch (const util::Error& e) {
    util::trace(std::string("shared holder details not recorded: ") + e.what());
  }
}

Verdict SharedLock::move_lease(std::string_view value, std::int64_t expiry, Micros keep,
                               std::string& new_value) {
  const SharedValue lease = parse_or_throw(m_key, value);
  new_value = shared_value(expiry, lease.id);  // before the write: see Lock::renew
  m_store.keep_keys_for(lifetime_for(keep));
  if (m_shared.renew(m_key, m_leases_key, lease.id, expiry)) {
    return Verdict::done;
  }
  return lease.expiry < now_seconds() ? Verdict::expired : Verdict::absent;
}

Verdict SharedLock::renew(std::string_view value, std::int64_t ttl, std::string& new_value) {
  return move_lease(value, expiry_for(now_seconds(), ttl), std::chrono::seconds(ttl), new_value);
}

Verdict SharedLock::release(std::string_view value) {
  const SharedValue lease = parse_or_throw(m_key, value);
  if (m_shared.release(m_key, m_leases_key, lease.id, m_queue_key)) {
    return Verdict::done;
  }
  return lease.expiry < now_seconds() ? Verdict::expired : Verdict::absent;
}

Verdict SharedLock::release_after(std::string_view value, Micros not_before,
                                  std::string& kept_value) {
  kept_value.clear();
  const Micros now = m_clock.now();
  if (not_before <= now) {
    return release(value);
  }
  const Verdict verdict =
      move_lease(value, expiry_holding_until(not_before), not_before - now, kept_value);
  if (verdict != Verdict::done) {
    kept_value.clear();
  }
  return verdict;
}

}  // namespace nxlock::lock
