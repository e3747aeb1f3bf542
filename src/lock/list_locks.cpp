// list_locks: the store's enumeration turned into lock rows (list_locks.hpp).
#include "lock/list_locks.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "store/keys.hpp"
#include "lock/lease_lock.hpp"
#include "store/lock_listing.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"

namespace nxlock::lock {

namespace {

bool by_key_and_slot(const LockRow& a, const LockRow& b) {
  if (a.key != b.key) {
    return a.key < b.key;
  }
  if (a.slot != b.slot) {
    return a.slot.value_or(-1) < b.slot.value_or(-1);
  }
  return a.value < b.value;  // a lock's shared holders, by expiry then lease
}

// One row per live leased holder of the lock `row` (its lease's value, expiry,
// slot, token and details); the lock's own row when it has none. Leases whose
// set lost the key are no holders: the store lists none.
void add_rows(LockRow&& row, std::vector<store::SharedHolder> shared, std::vector<LockRow>& rows) {
  // A lock's leases are of one kind: shared holders' or slots'.
  (std::string_view(lease_kind(shared)) == "slots" ? row.slots_held : row.shared_holders) =
      shared.size();
  for (const auto& lease : shared) {
    SharedHolderView view = view_shared_holder(lease);
    LockRow& holder = rows.emplace_back(row);
    holder.value = std::move(view.value);
    if (view.slot > 0) {
      holder.slot = view.slot;
    }
    holder.expires_at = view.expires_at;
    holder.fence = view.fence ? view.fence : row.fence;
    holder.holder = std::move(view.holder);
  }
  if (shared.empty()) {
    rows.push_back(std::move(row));
  }
}

// The waiters that `tickets` name, in the queue's order (arrival).
std::vector<WaiterRow> waiter_rows(const std::vector<std::string>& tickets) {
  std::vector<WaiterRow> rows;
  rows.reserve(tickets.size());
  for (const auto& ticket : tickets) {
    rows.push_back({ticket, details_of_ticket(ticket)});
  }
  return rows;
}

}  // namespace

std::string prefixed_pattern(std::string_view prefix, std::string_view pattern) {
  std::string out;
  for (const char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  out += pattern;
  return out;
}

std::vector<LockRow> list_locks(store::Store& store, std::string_view pattern,
                                std::int64_t now_seconds, bool with_expired) {
  store::LockListing* listing = store.listing();
  if (listing == nullptr) {
    throw util::Error(util::ErrorKind::internal, store.describe(),
                      "this backend cannot list locks");
  }
  // Slots and shared holders are leases beside their lock's key: the lock's
  // own key is the one to find.
  const auto wanted = [](std::string_view key) { return !store::is_companion_key(key); };
  std::vector<LockRow> rows;
  {
    listing->list(pattern, wanted, [&](std::vector<store::ListedLock>&& batch) {
      for (auto& found : batch) {
        LockRow row;
        row.key = found.key;
        row.expires_at = store::parse_lock_timestamp(found.value).value_or(0);
        row.expired = row.expires_at < now_seconds && !found.owner_alive;
        if (row.expired && !with_expired) {
          continue;
        }
        row.value = std::move(found.value);
        if (found.holder) {
          row.holder = Holder::from_json(*found.holder);
          if (row.holder && row.holder->value != row.value) {
            row.holder.reset();  // another holder's, left behind
          }
        }
        row.fence = found.fence;
        row.waiters = found.waiters;
        row.waiting = waiter_rows(found.queued);
        add_rows(std::move(row), std::move(found.shared), rows);
      }
    });
  }
  sort_rows(rows);
  return rows;
}

void sort_rows(std::vector<LockRow>& rows) {
  std::sort(rows.begin(), rows.end(), by_key_and_slot);
}

}  // namespace nxlock::lock
