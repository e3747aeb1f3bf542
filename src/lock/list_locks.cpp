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
  std::sort(rows.begin(), rows.end(), by_key_and_slot);
  return rows;
}

std::vector<LockRow> list_quorum_locks(const std::vector<QuorumServer>& servers,
                                       std::string_view pattern, std::int64_t now_seconds,
                                       bool with_expired) {
  const std::size_t majority = servers.size() / 2 + 1;
  // Each (key, slot, value) and the rows of the servers that hold it.
  std::map<std::tuple<std::string, int, std::string>, std::vector<LockRow>> votes;
  std::size_t listed = 0;
  std::optional<util::Error> failure;
  for (const auto& server : servers) {
    try {
      const auto store = server.open();
      for (auto& row : list_locks(*store, pattern, now_seconds, with_expired)) {
        votes[{row.key, row.slot.value_or(-1), row.value}].push_back(std::move(row));
      }
      ++listed;
    } catch (const util::Error& e) {
      failure = e;
    }
  }
  if (listed < majority) {
    throw util::Error(util::ErrorKind::unavailable, failure ? failure->subject() : "quorum",
                      std::to_string(listed) + " of " + std::to_string(servers.size()) +
                          " servers could list, fewer than a majority" +
                          (failure ? " (" + failure->reason() + ")" : ""));
  }
  std::vector<LockRow> rows;
  for (auto& [id, held] : votes) {
    if (held.size() < majority) {
      continue;
    }
    std::vector<std::int64_t> fences;
    for (const auto& other : held) {
      if (other.fence) {
        fences.push_back(*other.fence);
      }
    }
    LockRow row = std::move(held.front());
    row.held_on = held.size();
    row.fence = quorum_token(std::move(fences), servers.size());  // as status shows it
    for (auto& other : held) {
      if (other.waiting.size() > row.waiting.size()) {
        row.waiting = std::move(other.waiting);  // as the most waiters
      }
      row.waiters = std::max(row.waiters, other.waiters);
      row.shared_holders = std::max(row.shared_holders, other.shared_holders);
      row.slots_held = std::max(row.slots_held, other.slots_held);
      if (!row.holder && other.holder) {
        row.holder = std::move(other.holder);
      }
    }
    if (row.holder && row.holder->fence != 0) {
      row.fence = row.holder->fence;  // the holder's own record of it, as status shows it
    }
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), by_key_and_slot);
  return rows;
}

}  // namespace nxlock::lock
