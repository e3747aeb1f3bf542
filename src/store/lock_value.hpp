// The lock value format and the fencing counter's, known to every backend's fenced steps.
//
// A lock value is the decimal Unix time at which the lock expires (the SETNX
// page's format); a fencing counter holds the decimal integer INCR leaves. The
// fenced steps of Store decide with these, so the lock layer and every backend
// share one definition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nxlock::store {

// Parses a lock value: 1 to 18 plain decimal digits. nullopt if it is not one.
std::optional<std::int64_t> parse_lock_timestamp(std::string_view text);

// True if a GETSET that returned `old` took the lock over: there was no value,
// or it was a lock timestamp older than `now_seconds` (the page's rule).
bool getset_owns(const std::optional<std::string>& old, std::int64_t now_seconds);

// The value an INCR of the counter holding `current` (nullptr: absent) leaves,
// as Redis computes it. Throws util::Error(data) naming `counter_key` if the
// counter holds something else than an integer, or is at its maximum.
std::int64_t next_fence(const std::string* current, std::string_view counter_key);

// Parses a counter's value; nullopt if it is not an integer as INCR writes it.
std::optional<std::int64_t> parse_fence(std::string_view text);

}  // namespace nxlock::store
