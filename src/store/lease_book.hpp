// The shared holders' leases (SharedLeases) as the stores that decide in C++ keep
// them (the embedded store, the memory store). Redis decides in its scripts
// (scripts.cpp), its own copy of these rules: keep the two in step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.hpp"

namespace nxlock::store {

// A lease set's value: a line "@TOKEN", the token of the set's latest take,
// then one line "ID EXPIRY" per leased holder, EXPIRY a lock value (Unix
// seconds, expired when older than now), then " DETAILS" once the holder
// recorded who it is (SharedLeases::record_details: one line of text). A set written
// before sets had tokens has no "@" line.
class LeaseBook {
 public:
  struct Lease {
    std::string id;
    std::int64_t expiry = 0;
    std::string details;  // empty until recorded
  };

  // The leases in `text` (nullopt: none); a line that does not parse is left
  // out, and so dropped by the next write: a lease is advice about a holder,
  // the lock key is what keeps exclusive takers out.
  explicit LeaseBook(const std::optional<std::string>& text);

  // Drops the leases that expired before `now_seconds`.
  void prune(std::int64_t now_seconds);
  // The expiry of lease `id`, if it is there.
  std::optional<std::int64_t> expiry_of(std::string_view id) const;
  // Whether the lease `match` names is there: its id, and its expiry and the
  // token of its take where `match` names them (a lease whose details hold no
  // token, an older nxlock's, matches any).
  bool has(const SharedLeases::LeaseMatch& match) const;
  // The token of lease `id`'s take: the first word of its details (the take
  // records it, record_details() keeps it first).
  std::optional<std::int64_t> token_of(std::string_view id) const;
  // Adds the lease, or moves its expiry (its details stay).
  void put(std::string_view id, std::int64_t expiry);
  // Records the details of lease `id`; false if it is not there.
  bool record_details(std::string_view id, std::string_view details);
  void remove(std::string_view id);
  void clear() { m_leases.clear(); }
  // The lowest slot of 1..slots no lease holds, as a lease id ("#N"); empty if all are.
  std::string free_slot(int slots) const;
  // The leases as SharedLeases::holders() returns them.
  std::vector<SharedHolder> holders() const;

  bool empty() const { return m_leases.empty(); }
  std::size_t size() const { return m_leases.size(); }
  // The latest expiry: what the lock key holds while leases live.
  std::int64_t latest() const;
  // The token of the set's latest take, which the lock key keeps while the set holds it.
  std::optional<std::int64_t> token() const { return m_token; }
  void set_token(std::int64_t token) { m_token = token; }
  // Whether these (pruned) leases hold the lock key, which holds `current` and
  // whose latest take issued `key_token`: the key holds their latest expiry,
  // and no other holder took it since (a timestamp alone can be another
  // holder's that expires in the same second). docs/DESIGN.md, "Lock kinds".
  bool holds(const std::optional<std::string>& current,
             std::optional<std::int64_t> key_token) const;
  std::string encode() const;

 private:
  std::vector<Lease> m_leases;
  std::optional<std::int64_t> m_token;
};

// What a taker of a lease finds in the lock key `current` (whose latest take
// issued `key_token`) beside the pruned `book`, for a shared lease (slots 0)
// or a slot of `slots`.
enum class LeaseGate {
  fresh,  // absent or expired: the leases left in `book` are lost; a new set begins
  join,   // held by a live set of the same kind with room: the lease joins it
  held,   // an exclusive holder, the other kind, or every slot: wait
  not_lock,  // not a lock value: never broken
};
LeaseGate lease_gate(const std::optional<std::string>& current,
                     std::optional<std::int64_t> key_token, const LeaseBook& book, int slots,
                     std::int64_t now_seconds);

}  // namespace nxlock::store
