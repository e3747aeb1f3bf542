// LockListing: every lock a backend holds, with what nxlock keeps beside each (nxlock list).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/keys.hpp"
#include "store/store.hpp"

namespace nxlock::store {

// One lock key as a listing found it, read with the keys beside it in the
// same batch (not atomically with them: a listing is a survey, not a step).
struct ListedLock {
  std::string key;
  std::string value;                    // a lock timestamp (parse_lock_timestamp)
  std::optional<std::string> holder;    // the text of its holder record (store::holder_key)
  std::optional<std::int64_t> fence;    // the latest token issued for it
  std::optional<std::int64_t> waiters;  // live waiters queued; nullopt: the backend keeps none
  // Their tickets, in arrival order (lock/queue_ticket.hpp: what each tells of
  // its waiter); a slot's are its semaphore's, whose waiters wait for any slot.
  std::vector<std::string> queued;
  // The live leases (store::shared_key) of the set that holds the key (LeaseSet::holding);
  // none: exclusive.
  std::vector<SharedHolder> shared;
  // The embedded store: a live run-locked owns it, so it is held whatever its
  // timestamp says (man page, URLS AND BACKENDS).
  bool owner_alive = false;
};

// Reached by Store::listing(), for the backends that can enumerate their keys.
class LockListing {
 public:
  virtual ~LockListing() = default;

  // Which keys the caller wants read (the lock layer leaves out the keys kept
  // beside a lock, whose values may look like timestamps too).
  using Wanted = std::function<bool(std::string_view key)>;
  // Receives one batch of locks; batches come as the backend finds them.
  using Visit = std::function<void(std::vector<ListedLock>&&)>;

  // Calls `visit` with every key that matches `pattern` (a glob as Redis MATCH
  // and fnmatch(3) read it: * ? [...] \), that `wanted` accepts and that holds
  // a lock timestamp, in batches, each read in a few round trips (Redis: SCAN,
  // never KEYS, on every master of a cluster). A key that changes meanwhile
  // may be missed or listed with a newer value. Throws util::Error as the
  // other operations do (unavailable, permission, data).
  virtual void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) = 0;
};

// Whether `key` matches the glob `pattern` (fnmatch(3), no flags: '*' also
// matches '/', as Redis MATCH does). fnmatch reads C strings: a key holding a
// NUL byte matches only "*".
bool glob_match(std::string_view pattern, std::string_view key);

}  // namespace nxlock::store
