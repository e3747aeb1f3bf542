// list_locks: the locks a store holds, as rows for `nxlock list` (value, holder, token, waiters).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/holder.hpp"
#include "lock/queue_ticket.hpp"
#include "store/store.hpp"

namespace nxlock::lock {

// One live waiter of a lock, as its ticket tells of it (details_of_ticket):
// no details for a waiter of an older nxlock.
struct WaiterRow {
  std::string ticket;
  std::optional<WaiterDetails> details;
};

// One lock as a listing found it.
struct LockRow {
  std::string key;          // the lock's key (for a slot: the counting lock's key)
  std::optional<int> slot;  // set: this is slot `slot` of `key` (--slots, keys.hpp slot_of)
  std::string value;        // the lock value, its expiry as the page writes it
  std::int64_t expires_at = 0;
  bool expired = false;  // older than now, no live owner keeping it: abandoned, free to take
  std::optional<Holder> holder;         // the holder record, when it describes `value`
  std::optional<std::int64_t> fence;    // the latest token issued for the lock
  std::optional<std::int64_t> waiters;  // live waiters queued; nullopt: the backend keeps none
  // Those waiters, in the order they came (list --waiters): for a slot,
  // its semaphore's, as they wait for any of its slots.
  std::vector<WaiterRow> waiting;
  // Live --shared holders of the lock (0: exclusive, or slots). Each has its
  // own row: `value` its lease's ("EXPIRY:ID"), `expires_at` its lease's
  // expiry, `fence` its token and `holder` its details (when it recorded them).
  std::size_t shared_holders = 0;
  // Live slot holders of the lock (--slots; 0 for any other kind), each a row
  // as a shared holder's, with its `slot`.
  std::size_t slots_held = 0;
  std::size_t held_on = 0;  // a quorum's: how many of its servers hold `value` (else 0)
};

// The glob for store keys that a user's glob `pattern` means under `prefix`
// (--prefix): the prefix's own glob characters escaped, so that it matches
// itself only.
std::string prefixed_pattern(std::string_view prefix, std::string_view pattern);

// Every lock in `store` whose key (a slot's counting lock's key) matches the
// glob `pattern` (store keys: prefixed_pattern), held at `now_seconds`, and
// with `with_expired` the expired ones too; sorted by key, then slot. The keys
// nxlock keeps beside a lock are not locks; a slot is (LockRow::slot).
// Throws util::Error(internal) if the backend cannot list, and as Store does.
std::vector<LockRow> list_locks(store::Store& store, std::string_view pattern,
                                std::int64_t now_seconds, bool with_expired);

// Sorts rows as list_locks() returns them: by key, then slot, then value.
void sort_rows(std::vector<LockRow>& rows);

}  // namespace nxlock::lock
