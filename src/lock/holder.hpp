// Holder: who holds a lock (host, pid, command), kept beside the lock (store::holder_key).
//
// The lock's own value stays the bare timestamp of the documented pattern, so other
// clients interoperate; these details are advisory and only shown while the record's
// `value` matches the lock's current value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/store.hpp"
#include "util/time.hpp"

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
  // The process's start time and boot (util::ProcessIdentity), so that one that
  // is gone can be told from a new process given the same pid; 0 and empty in
  // records of older versions.
  std::uint64_t start = 0;
  std::string boot;
  // A quorum's token for this acquisition (quorum_token), which no one server's
  // counter need hold; 0 elsewhere, where the lock's counter says it.
  std::int64_t fence = 0;
  // run-locked's watchdog (pid and start time, on the same boot), which
  // releases the lock once the job is gone if the holder dies; 0: none.
  std::int64_t watchdog_pid = 0;
  std::uint64_t watchdog_start = 0;
  // A run-locked that looks for a --replace request while it renews
  // (replace_request.hpp): it can be asked to stop its job. False for a
  // `lock`, a --no-renew run, an older nxlock.
  bool replaceable = false;

  // True when the holder process is known not to run: it ran on this host, and
  // either this host has booted since or that process no longer runs (or is
  // stopped); and it is not releasing(). False when it cannot be known (another
  // host, an older record). The lock itself stays held until it expires.
  bool gone() const;
  // True when the holder process is known to have died but its watchdog runs:
  // it releases the lock once the job has stopped.
  bool releasing() const;

  std::string to_json() const;
  // nullopt if the text is not a holder record.
  static std::optional<Holder> from_json(std::string_view text);
};

// A longer command is recorded cut (at a character's boundary) and "…" added:
// the record must fit a backend's request (etcd refuses one over its limit,
// and the details would be lost), and a person reads its start.
inline constexpr std::size_t k_holder_command_bytes = 4096;

// This process's description: host name, `pid`, `command` (cut to
// k_holder_command_bytes), acquired now, and its watchdog's pid (0: none).
Holder describe_holder(std::string value, std::int64_t pid, std::string command,
                       std::int64_t acquired_at, std::int64_t watchdog_pid = 0);

// Writes the record; failures are traced, never thrown: details are advisory and
// must not cost the caller a lock it already holds. The record is kept
// `lifetime` (store::StepPolicy::lifetime; zero: no expiry).
void write_holder(store::Store& store, std::string_view key, const Holder& holder,
                  util::Micros lifetime);

// The record for the lock currently holding `value`, if there is one.
std::optional<Holder> read_holder(store::Store& store, std::string_view key,
                                  std::string_view value);

// Deletes the record if it still describes `value` (never another holder's).
void forget_holder(store::Store& store, std::string_view key, std::string_view value);

// The record a Lock keeps for the lock it holds. Remembering what it wrote
// spares release() and renew() a read, and lets them change exactly that
// record: a newer holder's record is never replaced or deleted. Every failure
// is traced, never thrown (the details are advisory).
class HolderBook {
 public:
  HolderBook(store::Store& store, std::string_view key) : m_store(store), m_key(key) {}

  // Each write keeps the record `lifetime` (store::StepPolicy::lifetime): the
  // lock's own keys' lifetime, so the details expire with the lock.

  // Writes `holder` beside the lock and remembers it.
  void record(Holder holder, util::Micros lifetime);

  // The lock moved from value `from` to `to` (a renewal): the details follow it.
  void follow(std::string_view from, std::string_view to, util::Micros lifetime);

  // run-locked --hold: the lock moved from `from` to `to`, and the job finished
  // at `finished_at` (Unix seconds). Only our own record is changed.
  void finish(std::string_view from, std::string_view to, std::int64_t finished_at,
              util::Micros lifetime);

  // The lock holding `value` is gone: so are its details.
  void forget(std::string_view value);

 private:
  bool ours(std::string_view value) const { return m_holder && m_holder->value == value; }

  store::Store& m_store;
  std::string m_key;
  std::optional<Holder> m_holder;  // what record() wrote, if it was called
};

}  // namespace nxlock::lock
