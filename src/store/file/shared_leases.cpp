// FileStore's shared holders' leases (SharedLeases): the lease set is an entry beside
// the lock, changed together with the lock's entry under both stripe locks
// (Buckets::update_pair); the rules are LeaseBook's, as the memory store's.
#include "store/file/file_store.hpp"
#include "store/file/owner.hpp"
#include "store/lease_book.hpp"

namespace nxlock::store {

namespace {

using record::Entry;

std::optional<std::string> value_of(const Entry* entry) {
  return entry == nullptr ? std::nullopt : std::optional(entry->value);
}

std::int64_t now_seconds() {
  return util::whole_seconds(util::wall_now());
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

SharedLeases::Take FileStore::take_lease(std::string_view key, std::string_view leases,
                                         std::string_view id, std::int64_t expiry) {
  Take result;
  const std::int64_t now = now_seconds();
  std::string lock_value;
  std::string encoded;
  // The lock's entry is written first: a crash between the two writes leaves
  // the key held with no lease, never a lease with the key free.
  m_buckets.update_pair(key, leases, false, [&](const Entry* lock, const Entry* current) {
    LeaseBook book(value_of(current));
    book.prune(now);
    result.current = value_of(lock);
    SharedGate gate = shared_gate(result.current, !book.empty(), now);
    if (gate == SharedGate::open && book.empty() && lock != nullptr && owner::keeps_held(*lock)) {
      gate = SharedGate::exclusive;  // expired by our clock, but its owner runs and renews it
    }
    if (gate != SharedGate::open) {
      result.outcome = Take::Outcome::held;
      return std::pair{Change{}, Change{}};
    }
    book.put(id, expiry);
    // Above the old lock's own token too, whatever the counter says.
    result.fence = issue_fence(lock != nullptr && lock->fence ? *lock->fence + 1 : 0);
    result.outcome = Take::Outcome::taken;
    lock_value = std::to_string(book.latest());
    encoded = book.encode();
    Change lock_change{Change::Kind::put, lock_value};
    lock_change.fence = result.fence;
    return std::pair{lock_change, lease_change(encoded, book, *result.fence)};
  });
  return result;
}

SharedLeases::Take FileStore::take(std::string_view key, std::string_view, std::string_view leases,
                                   std::string_view id, std::int64_t expiry, std::string_view queue,
                                   std::string_view ticket, bool waiting, util::Micros lease) {
  // The queue's gate is an unlocked read, as for the queued SETNX: an
  // exclusive waiter that joins just after it waits for this one lease.
  const auto leave_line = [&] {
    // Out of the line, and the next waiter may come along (if it is shared).
    drop_from_queue(queue, {std::string(ticket)});
    wake_first(queue);
  };
  // A free lock with nobody in line before us is tried with no write to the queue.
  bool in_line = false;
  if (may_go_first(queue, ticket, in_line)) {
    Take result = take_lease(key, leases, id, expiry);
    if (result.outcome == Take::Outcome::taken && in_line) {
      leave_line();
    }
    if (result.outcome == Take::Outcome::taken || !waiting) {
      return result;
    }
  }
  bool pruned = false;
  const std::string head = keep_in_line(queue, ticket, waiting, lease, pruned);
  if (!head.empty() && head != ticket) {
    Take behind;
    behind.current = get(key);
    if (pruned && !behind.current) {
      wake_first(queue);  // the one we dropped may have taken its wake-up with it
    }
    return behind;
  }
  Take result = take_lease(key, leases, id, expiry);
  if (result.outcome == Take::Outcome::taken && !head.empty()) {
    leave_line();
  }
  return result;
}

bool FileStore::renew(std::string_view key, std::string_view leases, std::string_view id,
                      std::int64_t expiry) {
  const std::int64_t now = now_seconds();
  bool renewed = false;
  std::string lock_value;
  std::string encoded;
  m_buckets.update_pair(key, leases, false, [&](const Entry* lock, const Entry* current) {
    LeaseBook book(value_of(current));
    book.prune(now);
    if (!book.expiry_of(id)) {
      return std::pair{Change{}, Change{}};
    }
    renewed = true;
    book.put(id, expiry);
    lock_value = std::to_string(book.latest());
    encoded = book.encode();
    Change lock_change{Change::Kind::put, lock_value};
    lock_change.keep_meta = true;  // the latest shared taker's token stays
    const std::int64_t token = lock != nullptr && lock->fence ? *lock->fence : 1;
    return std::pair{lock_change, lease_change(encoded, book, token)};
  });
  return renewed;
}

bool FileStore::release(std::string_view key, std::string_view leases, std::string_view id,
                        std::string_view queue) {
  const std::int64_t now = now_seconds();
  bool released = false;
  bool last = false;
  std::string lock_value;
  std::string encoded;
  // The lease set is written first: a crash between the two writes leaves the
  // key held a little longer, never a live lease with the key free.
  m_buckets.update_pair(key, leases, true, [&](const Entry* lock, const Entry* current) {
    LeaseBook book(value_of(current));
    book.prune(now);
    if (!book.expiry_of(id)) {
      return std::pair{Change{}, Change{}};
    }
    released = true;
    book.remove(id);
    encoded = book.encode();
    const std::int64_t token = lock != nullptr && lock->fence ? *lock->fence : 1;
    if (book.empty()) {
      last = true;
      return std::pair{Change{Change::Kind::erase, {}}, lease_change(encoded, book, token)};
    }
    lock_value = std::to_string(book.latest());
    Change lock_change{Change::Kind::put, lock_value};
    lock_change.keep_meta = true;
    return std::pair{lock_change, lease_change(encoded, book, token)};
  });
  if (last) {
    wake_first(queue);  // as a release does: the first queued waiter may take it
  }
  return released;
}

bool FileStore::describe(std::string_view leases, std::string_view id, std::string_view details) {
  const std::int64_t now = now_seconds();
  bool described = false;
  std::string encoded;
  m_buckets.update(leases, false, [&](const Entry* current) {
    LeaseBook book(value_of(current));
    book.prune(now);
    if (current == nullptr || !book.describe(id, details)) {
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

std::vector<SharedHolder> FileStore::holders(std::string_view leases) {
  LeaseBook book(get_entry_value(leases));
  book.prune(now_seconds());
  return book.holders();
}

}  // namespace nxlock::store
