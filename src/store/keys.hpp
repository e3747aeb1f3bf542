// The keys nxlock keeps beside a lock (holder details, fencing counter, queue and its
// leases, leased holders), and how they are named: every backend's one home for them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nxlock::store {

// The key named `suffix` ("fence", "holder", "queue"; never holds ':') beside
// the lock `key`, the same on every backend:
//
//   "{" TAG "}:" suffix ":" key
//
// where TAG is the key's Redis Cluster hash tag (the text between its first '{'
// and the first '}' after it, when not empty), or the key itself when it has
// none: "backup" → "{backup}:fence:backup", "{jobs}.backup" →
// "{jobs}:fence:{jobs}.backup". The companion lands in the key's hash slot, and
// the name is injective: TAG ends at the first '}' (it holds none), the suffix
// at the next ':', the rest is the key. So no two lock keys share a companion
// ("x" and "{x}" do not), and a lock named like a companion is refused
// (check_lock_key).
//
// A key without a tag that holds a '}' ("a}b") cannot be wrapped so; it gets
// "}" suffix ":" key, still injective (it is the only form that starts with
// '}'), but in no particular slot: a cluster refuses the fenced scripts with
// CROSSSLOT, which the Redis backend reports.
std::string companion_key(std::string_view key, std::string_view suffix);

// The fencing counter of `key`: companion_key(key, "fence").
std::string fence_key(std::string_view key);

// The holder's details beside the lock `key` (lock/holder.hpp writes and reads them).
std::string holder_key(std::string_view key);

// The waiters' queue of `key`: companion_key(key, "queue").
std::string queue_key(std::string_view key);

// The waiters' liveness leases beside the queue `queue` (queue_key), where a
// backend keeps them apart from the queue's order (Redis).
std::string queue_lease_key(std::string_view queue);

// A run-locked --replace's request that the holder of `key` stop its job:
// companion_key(key, "replace") (lock/replace_request.hpp writes and reads it).
std::string replace_key(std::string_view key);

// The shared holders' leases of `key` (--shared): companion_key(key, "shared").
std::string shared_key(std::string_view key);

// The shared holders' details beside the leases `leases` (shared_key):
// companion_key(leases, "holder").
std::string details_key(std::string_view leases);

// Slot `slot` (1..N) of the counting semaphore `key` (--slots N): an ordinary
// lock, with companions of its own, named companion_key(key, "slot" + slot):
// "backup", 3 → "{backup}:slot3:backup". It lands in the key's hash slot, beside
// the semaphore's one waiters' queue (queue_key(key)), and no user can name it.
std::string slot_key(std::string_view key, int slot);

// The semaphore and slot number a slot key (slot_key()) names; nullopt for
// any other name.
struct SlotOf {
  std::string key;
  int slot = 0;
};
std::optional<SlotOf> slot_of(std::string_view name);

// The waiters' queue that the waiters for lock `key` stand in: queue_key(key),
// or for a slot (slot_key()) its semaphore's, shared by all its slots.
std::string waiters_queue_of(std::string_view key);

// Whether `name` is the companion ("fence", "holder", "queue", "lease", "shared", "replace",
// "slot<digits>") of some key, or of a companion: a lock must not be named so,
// or taking it would write another lock's counter, details, queue or slot.
bool is_companion_key(std::string_view name);

// Throws util::Error(usage, 64) when `key` may not name a lock (is_companion_key).
void check_lock_key(std::string_view key);

}  // namespace nxlock::store
