// Holder: who holds a lock (host, pid, command), kept beside the lock under "<key>:holder".
//
// The lock's own value stays the bare timestamp of the documented pattern, so other
// clients interoperate; these details are advisory and only shown while the record's
// `value` matches the lock's current value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/store.hpp"

namespace nxlock::lock {

struct Holder {
  std::string value;  // the lock value this record describes
  std::string host;
  std::int64_t pid = 0;
  std::string command;
  std::int64_t acquired_at = 0;  // Unix seconds
  // Unix seconds at which the job ended while the lock stays held (run-locked
  // --hold); 0 while it runs.
  std::int64_t finished_at = 0;

  std::string to_json() const;
  // nullopt if the text is not a holder record.
  static std::optional<Holder> from_json(std::string_view text);
};

// The key under which the holder of `key` is described.
std::string holder_key(std::string_view key);

// This process's description: host name, `pid`, `command`, acquired now.
Holder describe_holder(std::string value, std::int64_t pid, std::string command,
                       std::int64_t acquired_at);

// Writes the record; failures are traced, never thrown: details are advisory and
// must not cost the caller a lock it already holds.
void record_holder(store::Store& store, std::string_view key, const Holder& holder);

// The record for the lock currently holding `value`, if there is one.
std::optional<Holder> read_holder(store::Store& store, std::string_view key,
                                  std::string_view value);

// Deletes the record if it still describes `value` (never another holder's).
void forget_holder(store::Store& store, std::string_view key, std::string_view value);

}  // namespace nxlock::lock
