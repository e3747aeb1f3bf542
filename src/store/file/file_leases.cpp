// FileLeases, the embedded store's leased holders (SharedLeases: shared and slots): the lease
// set is an entry beside the lock, changed together with the lock's entry under both stripe
// locks (Buckets::update_pair); the rules are LeaseBook's, as the memory store's.
#include "store/file/file_leases.hpp"
#include "store/file/owner.hpp"
#include "store/lease_book.hpp"
#include "util/time.hpp"

namespace nxlock::store {

namespace {

using record::Entry;

std::optional<std::string> value_of(const Entry* entry) {
  return entry == nullptr ? std::nullopt : std::optional(entry->value);
}

// The lease set as written: details beside the lock (its token, and its expiry
// in `until`), so that the sweep of abandoned locks takes it too once every
// holder is gone.
Change lease_change(const std::string& encoded, const LeaseBook& book, std::int64_t token) {
  if (book.empty()) {
    return Change{Change::Kind::erase, {}};
  }
  Change change{Change::Kind::put, encoded};
  change.fence = token;
  change.until = book.latest();
  return change;
}

}  // namespace

SharedLeases::Take FileLeases::take_lease(const Keys& keys, const TakeRequest& request) {
  Take result;
  const std::int64_t now = util::wall_seconds();
  std::string lock_value;
  std::string encoded;
  // The lock's entry is written first: a crash between the two writes leaves
  // the key held with no lease, never a lease with the key free.
  m_core.buckets().update_pair(
      keys.lock, keys.leases, false, [&](const Entry* lock, const Entry* current) {
        LeaseBook book(value_of(current));
        book.prune(now);
        result.current = value_of(lock);
        const auto key_token = lock != nullptr ? lock->fence : std::nullopt;
        LeaseGate gate = lease_gate(result.current, key_token, book, request.slots, now);
        if (gate == LeaseGate::fresh && lock != nullptr && owner::keeps_held(*lock)) {
          gate = LeaseGate::held;  // expired by our clock, but its owner runs and renews it
        }
        if (gate == LeaseGate::held || gate == LeaseGate::not_lock) {
          result.outcome = Take::Outcome::held;
          return std::pair{Change{}, Change{}};
        }
        if (gate == LeaseGate::fresh) {
          book.clear();  // the leases of a set that lost the key are not holders
        }
        result.id = request.slots > 0 ? book.free_slot(request.slots) : std::string(request.id);
        book.put(result.id, request.expiry);
        // Above the old lock's own token too, whatever the counter says.
        result.fence = m_core.issue_fence(lock != nullptr && lock->fence ? *lock->fence + 1 : 0);
        result.outcome = Take::Outcome::taken;
        book.set_token(*result.fence);
        book.record_details(result.id,
                            std::to_string(*result.fence));  // the lease's own token (LeaseMatch)
        lock_value = std::to_string(book.latest());
        encoded = book.encode();
        Change lock_change{Change::Kind::put, lock_value};
        lock_change.fence = result.fence;
        return std::pair{lock_change, lease_change(encoded, book, *result.fence)};
      });
  return result;
}

SharedLeases::Take FileLeases::take(const Keys& keys, const TakeRequest& request,
                                    StepPolicy /*policy*/) {
  // The queue's gate is an unlocked read, as for the queued SETNX: an
  // exclusive waiter that joins just after it waits for this one lease.
  const auto leave_line = [&] {
    // Out of the line, and the next waiter may come along (if it is shared).
    m_queue.drop_from_queue(keys.queue, {std::string(request.ticket)});
    m_queue.wake_first(keys.queue);
  };
  // A free lock with nobody in line before us is tried with no write to the queue.
  bool in_line = false;
  if (m_queue.may_go_first(keys.queue, request.ticket, in_line)) {
    Take result = take_lease(keys, request);
    if (result.outcome == Take::Outcome::taken && in_line) {
      leave_line();
    }
    if (result.outcome == Take::Outcome::taken || !request.waiting) {
      return result;
    }
  }
  bool pruned = false;
  std::int64_t ahead = 0;
  const std::string head = m_queue.keep_in_line(keys.queue, request.ticket, request.waiting,
                                                request.lease, pruned, ahead);
  if (!head.empty() && head != request.ticket) {
    Take behind;
    behind.ahead = ahead;
    behind.current = m_steps.get(keys.lock);
    if (pruned && !behind.current) {
      m_queue.wake_first(keys.queue);  // the one we dropped may have taken its wake-up with it
    }
    return behind;
  }
  Take result = take_lease(keys, request);
  if (result.outcome == Take::Outcome::taken && !head.empty()) {
    leave_line();
  }
  return result;
}

bool FileLeases::renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
                       StepPolicy /*policy*/) {
  const std::int64_t now = util::wall_seconds();
  bool renewed = false;
  std::string lock_value;
  std::string encoded;
  m_core.buckets().update_pair(
      keys.lock, keys.leases, false, [&](const Entry* lock, const Entry* current) {
        LeaseBook book(value_of(current));
        book.prune(now);
        // A set whose key another client wrote or deleted holds nothing: never write over it.
        if (!book.holds(value_of(lock), lock != nullptr ? lock->fence : std::nullopt) ||
            !book.has(lease)) {
          return std::pair{Change{}, Change{}};
        }
        renewed = true;
        book.put(lease.id, expiry);
        lock_value = std::to_string(book.latest());
        encoded = book.encode();
        Change lock_change{Change::Kind::put, lock_value};
        lock_change.keep_meta = true;  // the latest leased taker's token stays
        const std::int64_t token = lock != nullptr && lock->fence ? *lock->fence : 1;
        return std::pair{lock_change, lease_change(encoded, book, token)};
      });
  return renewed;
}

bool FileLeases::release(const Keys& keys, const LeaseMatch& lease, StepPolicy /*policy*/) {
  const std::int64_t now = util::wall_seconds();
  bool released = false;
  bool room = false;
  std::string lock_value;
  std::string encoded;
  // The lease set is written first: a crash between the two writes leaves the
  // key held a little longer, never a live lease with the key free.
  m_core.buckets().update_pair(
      keys.lock, keys.leases, true, [&](const Entry* lock, const Entry* current) {
        LeaseBook book(value_of(current));
        book.prune(now);
        if (!book.holds(value_of(lock), lock != nullptr ? lock->fence : std::nullopt) ||
            !book.has(lease)) {
          return std::pair{Change{}, Change{}};
        }
        released = true;
        book.remove(lease.id);
        encoded = book.encode();
        const std::int64_t token = lock != nullptr && lock->fence ? *lock->fence : 1;
        room = book.empty() || is_slot_lease(lease.id);
        if (book.empty()) {
          return std::pair{Change{Change::Kind::erase, {}}, lease_change(encoded, book, token)};
        }
        lock_value = std::to_string(book.latest());
        Change lock_change{Change::Kind::put, lock_value};
        lock_change.keep_meta = true;
        return std::pair{lock_change, lease_change(encoded, book, token)};
      });
  if (room) {
    m_queue.wake_first(keys.queue);  // as a release does: the first queued waiter may take it
  }
  return released;
}

bool FileLeases::record_details(std::string_view leases, std::string_view id,
                                std::string_view details) {
  const std::int64_t now = util::wall_seconds();
  bool described = false;
  std::string encoded;
  m_core.buckets().update(leases, false, [&](const Entry* current) {
    LeaseBook book(value_of(current));
    book.prune(now);
    if (current == nullptr || !book.record_details(id, details)) {
      return Change{};
    }
    described = true;
    encoded = book.encode();
    Change change{Change::Kind::put, encoded};
    change.keep_meta = true;  // the token and expiry of the lease set stay
    return change;
  });
  return described;
}

LeaseSet FileLeases::read(const Keys& keys) {
  const auto [lock_bucket, leases_bucket] = m_core.buckets().read_pair(keys.lock, keys.leases);
  const auto find = [](const std::vector<Entry>& entries, std::string_view key) -> const Entry* {
    for (const auto& entry : entries) {
      if (entry.key == key) {
        return &entry;
      }
    }
    return nullptr;
  };
  const Entry* lock = find(lock_bucket, keys.lock);
  LeaseBook book(value_of(find(leases_bucket, keys.leases)));
  book.prune(util::wall_seconds());
  LeaseSet set;
  set.lock_value = value_of(lock);
  set.leases = book.holders();
  set.holding = book.holds(set.lock_value, lock != nullptr ? lock->fence : std::nullopt);
  return set;
}

}  // namespace nxlock::store
