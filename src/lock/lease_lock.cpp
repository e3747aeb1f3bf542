// LeaseLock: a shared or slot holder's lease, taken, renewed and given up over store::SharedLeases.
#include "lock/lease_lock.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "store/keys.hpp"
#include "lock/queue_ticket.hpp"
#include "lock/wait_loop.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/random.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::k_quoted_bytes;
using util::Micros;

util::Error usage(std::string_view key, std::string why) {
  return util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'", std::move(why));
}

// A lease id: "s" and 16 hex digits, unique among the holders of one key.
std::string make_lease_id() {
  char text[24];
  std::snprintf(text, sizeof text, "s%016llx", static_cast<unsigned long long>(util::random_u64()));
  return text;
}

std::string slot_id(int slot) {
  return "#" + std::to_string(slot);
}

bool is_lease_id(std::string_view id) {
  return id.size() == 17 && id[0] == 's' &&
         id.find_first_not_of("0123456789abcdef", 1) == std::string_view::npos;
}

std::optional<int> parse_slot_number(std::string_view digits) {
  int slot = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || slot < 1 ||
      digits.front() == '0') {
    return std::nullopt;
  }
  return slot;
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
  if (!expiry || !is_lease_id(id)) {
    return std::nullopt;
  }
  return SharedValue{*expiry, id};
}

std::string shared_value(std::int64_t expiry, std::string_view id) {
  return std::to_string(expiry) + ":" + std::string(id);
}

store::SharedLeases& leases_of(store::Store& store, std::string_view key, int slots) {
  store::SharedLeases* shared = store.shared();
  if (shared == nullptr) {
    throw usage(key, std::string(slots > 0 ? "--slots" : "--shared") + " is not available on " +
                         store.describe());
  }
  return *shared;
}

}  // namespace

ValueForm value_form(std::string_view value) {
  if (store::parse_lock_timestamp(value)) {
    return ValueForm::exclusive;
  }
  if (parse_shared_value(value)) {
    return ValueForm::shared;
  }
  const auto colon = value.find(':');
  if (colon != std::string_view::npos && parse_slot_number(value.substr(0, colon)) &&
      store::parse_lock_timestamp(value.substr(colon + 1))) {
    return ValueForm::slot;
  }
  return ValueForm::other;
}

bool is_shared_value(std::string_view value) {
  return parse_shared_value(value).has_value();
}

std::string slot_value(int slot, std::string_view value) {
  return std::to_string(slot) + ":" + std::string(value);
}

SlotValue parse_slot_value(std::string_view key, std::string_view text, int slots) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    throw usage(key, "'" + util::escape(text, k_quoted_bytes) +
                         "' names no slot: give the SLOT:VALUE that `lock --slots` printed "
                         "(such as 1:" +
                         util::escape(text, k_quoted_bytes) + ")");
  }
  const auto slot = parse_slot_number(text.substr(0, colon));
  if (!slot || *slot > slots) {
    throw usage(key, "'" + util::escape(text, k_quoted_bytes) + "' names no slot of 1.." +
                         std::to_string(slots) + " (SLOT:VALUE, as `lock --slots` printed it)");
  }
  return {*slot, std::string(text.substr(colon + 1))};
}

SharedHolderView view_shared_holder(const store::SharedHolder& lease) {
  SharedHolderView view;
  view.expires_at = lease.expiry;
  if (store::is_slot_lease(lease.id)) {
    view.slot = parse_slot_number(std::string_view(lease.id).substr(1)).value_or(0);
    view.value = slot_value(view.slot, std::to_string(lease.expiry));
  } else {
    view.value = shared_value(lease.expiry, lease.id);
  }
  if (lease.details) {
    // "TOKEN" as the take wrote it, then "TOKEN HOLDER" once its holder described itself.
    const std::string_view details = *lease.details;
    const auto space = details.find(' ');
    view.fence = store::parse_fence(details.substr(0, space));
    if (space != std::string_view::npos) {
      view.holder = Holder::from_json(details.substr(space + 1));
    }
  }
  return view;
}

const char* lease_kind(const std::vector<store::SharedHolder>& leases) {
  return !leases.empty() && store::is_slot_lease(leases.front().id) ? "slots" : "shared";
}

LeaseLock::LeaseLock(store::Store& store, Clock& clock, std::string key, int slots)
    : m_store(store),
      m_shared(leases_of(store, key, slots)),
      m_clock(clock),
      m_key(key),
      m_fence_key(store::fence_key(m_key)),
      m_queue_key(store::queue_key(m_key)),
      m_leases_key(store::shared_key(m_key)),
      m_slots(slots),
      m_id(slots > 0 ? std::string() : make_lease_id()),
      m_lock(store, clock, std::move(key)) {
  if (slots < 0 || slots > k_max_slots) {
    throw usage(m_key, "--slots must be 1 to " + std::to_string(k_max_slots));
  }
}

void LeaseLock::use_slot(int slot) {
  if (slot < 1 || slot > m_slots) {
    throw usage(m_key,
                "slot " + std::to_string(slot) + " is not one of 1.." + std::to_string(m_slots));
  }
  m_slot = slot;
  m_id = slot_id(slot);
}

store::SharedLeases::Keys LeaseLock::keys() const {
  return {m_key, m_fence_key, m_leases_key, m_queue_key};
}

std::int64_t LeaseLock::now_seconds() {
  return util::whole_seconds(m_clock.now());
}

LeaseLock::LeaseRef LeaseLock::lease_of(std::string_view value) const {
  if (m_slots > 0) {
    const auto expiry = store::parse_lock_timestamp(value);
    if (m_slot == 0 || !expiry) {
      throw usage(m_key, "'" + util::escape(value, k_quoted_bytes) +
                             "' is not a lock value (the SLOT:VALUE `lock --slots` printed)");
    }
    return {slot_id(m_slot), *expiry};
  }
  const auto lease = parse_shared_value(value);
  if (!lease) {
    throw usage(m_key, "'" + util::escape(value, k_quoted_bytes) +
                           "' is not a shared holder's value (the text `lock --shared` printed)");
  }
  // Matched by its expiry too, as a slot's: a value renewed away no longer
  // names the lease, though its id still does.
  return {std::string(lease->id), lease->expiry};
}

std::string LeaseLock::value_of(const LeaseRef& ref, std::int64_t expiry) const {
  return m_slots > 0 ? std::to_string(expiry) : shared_value(expiry, ref.id);
}

AcquireResult LeaseLock::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  if (m_slots > 0) {
    m_slot = 0;
    m_id.clear();
  }
  const bool waiting = !policy.wait_for || *policy.wait_for > Micros(0);
  std::optional<QueueTicket> ticket;
  if (store::WaitersQueue* waiters = m_store.queue()) {
    ticket.emplace(*waiters, m_key, m_queue_key,
                   m_slots > 0 ? WaiterKind::slots : WaiterKind::shared);
  }
  std::unique_ptr<store::Watcher> watcher;
  bool joining = ticket && waiting && policy.max_waiters > 0;  // see Lock::acquire

  WaitSteps steps;
  steps.look = [&] {
    // As Lock::try_once: one clock reading for the value and the decision.
    const Micros before = util::mono_now();
    const std::int64_t now = now_seconds();
    const Micros valid_from = std::min(before, util::mono_now() - m_clock.lag());
    const std::int64_t expiry = expiry_for(now, ttl);
    m_lifetime = lifetime_for(std::chrono::seconds(ttl));
    if (ticket) {
      ticket->joined(waiting);  // before the step: see Lock::acquire
    }
    store::SharedLeases::TakeRequest request;
    request.id = m_id;
    request.slots = m_slots;
    request.expiry = expiry;
    request.ticket = ticket ? ticket->ticket() : std::string_view();
    request.waiting = waiting;
    request.lease = k_queue_lease;
    const auto step = m_shared.take(keys(), request, step_policy());
    Look look;
    look.now_seconds = now;
    if (step.outcome == store::SharedLeases::Take::Outcome::taken) {
      if (ticket) {
        ticket->joined(false);  // the step left the queue
      }
      m_fence = step.fence.value_or(0);
      LeaseRef ref{step.id, expiry};
      if (m_slots > 0) {
        m_id = step.id;
        m_slot = parse_slot_number(std::string_view(step.id).substr(1)).value_or(0);
      }
      look.found = Look::Found::acquired;
      look.taken = taken_with(value_of(ref, expiry), now, valid_from, m_fence);
      return look;
    }
    look.found = Look::Found::busy;
    look.behind = step.outcome == store::SharedLeases::Take::Outcome::behind;
    if (std::exchange(joining, false) && look.behind && step.ahead >= policy.max_waiters) {
      look.found = Look::Found::crowded;  // the wait ends at once (held_until still said)
      look.ahead = step.ahead;
    }
    if (step.current) {
      const auto held_until = store::parse_lock_timestamp(*step.current);
      if (!held_until) {
        throw util::Error(util::ErrorKind::data, "lock '" + util::escape(m_key) + "'",
                          "holds '" + util::escape(*step.current, k_quoted_bytes) +
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

void LeaseLock::record_holder(Holder holder) {
  try {
    if (!m_shared.record_details(m_leases_key, m_id,
                                 std::to_string(m_fence) + " " + holder.to_json())) {
      util::trace("holder details not recorded: the lease of " + util::escape(m_key) +
                  " is gone");
    }
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not recorded: ") + e.what());
  }
}

std::optional<Holder> LeaseLock::holder_of(std::string_view value) {
  if (m_slots > 0) {
    const auto expiry = store::parse_lock_timestamp(value);
    for (const auto& lease : m_shared.read(keys()).leases) {
      const bool named = m_slot != 0 ? lease.id == m_id : store::is_slot_lease(lease.id);
      if (named && expiry && lease.expiry == *expiry) {
        if (auto holder = view_shared_holder(lease).holder) {
          return holder;
        }
      }
    }
  }
  return read_holder(m_store, m_key, value);
}

Verdict LeaseLock::why_not(const LeaseRef& ref) {
  const store::LeaseSet set = m_shared.read(keys());
  const auto& current = set.lock_value;
  if (ref.expiry < now_seconds()) {
    // Its time has passed: expired if a lock was ever taken here (the key, or
    // its counter), as Lock::why_not; never there otherwise.
    return current || m_fence != 0 || m_store.get(m_fence_key) ? Verdict::expired
                                                                 : Verdict::absent;
  }
  if (!current) {
    return Verdict::absent;
  }
  if (!store::parse_lock_timestamp(*current)) {
    throw util::Error(util::ErrorKind::data, "lock '" + util::escape(m_key) + "'",
                      "holds '" + util::escape(*current, k_quoted_bytes) +
                          "', not a lock timestamp");
  }
  // Held by the set this lease was in, which lost the key since: taken over.
  // Held by a live set without it, or by a lease this key never had: another
  // holder's value.
  const bool ours_was_here = std::any_of(set.leases.begin(), set.leases.end(),
                                         [&](const auto& lease) { return lease.id == ref.id; });
  return ours_was_here && !set.holding ? Verdict::taken_over : Verdict::held_by_other;
}

store::SharedLeases::LeaseMatch LeaseLock::match(const LeaseRef& ref) const {
  // Our own lease (the one we took) is matched by our token too: a slot's id
  // and expiry are the next holder's as well, once it took the same slot in
  // the same second.
  const bool ours = m_fence != 0 && ref.id == m_id;
  return {.id = ref.id, .expiry = ref.expiry, .token = ours ? std::optional(m_fence) : std::nullopt};
}

Renewed LeaseLock::move_lease(std::string_view value, std::int64_t expiry, Micros keep) {
  const LeaseRef ref = lease_of(value);
  m_lifetime = lifetime_for(keep);
  if (m_shared.renew(keys(), match(ref), expiry, step_policy())) {
    return {Verdict::done, value_of(ref, expiry)};
  }
  return {why_not(ref), {}};
}

RenewalPlan LeaseLock::plan_renewal(std::string_view value, std::int64_t ttl) {
  const LeaseRef ref = lease_of(value);
  const Micros reading = m_clock.now();
  return {ttl, reading, value_of(ref, expiry_for(util::whole_seconds(reading), ttl))};
}

Renewed LeaseLock::renew(std::string_view value, const RenewalPlan& plan) {
  return move_lease(value, expiry_for(util::whole_seconds(plan.reading), plan.ttl),
                    std::chrono::seconds(plan.ttl));
}

Verdict LeaseLock::release(std::string_view value) {
  const LeaseRef ref = lease_of(value);
  if (m_shared.release(keys(), match(ref), step_policy())) {
    return Verdict::done;
  }
  return why_not(ref);
}

Kept LeaseLock::release_after(std::string_view value, Micros not_before) {
  const Micros now = m_clock.now();
  if (not_before <= now) {
    return {release(value), {}};
  }
  const Renewed moved = move_lease(value, expiry_holding_until(not_before), not_before - now);
  return {moved.verdict, moved.value};
}

std::vector<Status> LeaseLock::statuses(const Status& whole) const {
  std::vector<Status> all(static_cast<std::size_t>(std::max(m_slots, 0)));
  for (auto& one : all) {
    one.now_seconds = whole.now_seconds;
  }
  for (const auto& lease : whole.shared) {
    const SharedHolderView view = view_shared_holder(lease);
    if (view.slot < 1 || view.slot > m_slots) {
      continue;
    }
    Status& one = all[static_cast<std::size_t>(view.slot - 1)];
    one.state = Status::State::held;
    one.value = std::to_string(view.expires_at);
    one.expires_at = view.expires_at;
    one.fence = view.fence;
    one.holder = view.holder;
  }
  return all;
}

}  // namespace nxlock::lock
