// The lock value format and the fencing counter's, known to every backend's fenced steps.
//
// A lock value is the decimal Unix time at which the lock expires (the SETNX
// page's format); a fencing counter holds the decimal integer INCR leaves. The
// fenced steps of Store decide with these, so the lock layer and every backend
// share one definition (the decisions themselves: store/fenced_steps.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nxlock::store {

// Parses a lock value: 1 to 18 plain decimal digits. nullopt if it is not one.
std::optional<std::int64_t> parse_lock_timestamp(std::string_view text);

// Parses a counter's value; nullopt if it is not an integer as INCR writes it.
std::optional<std::int64_t> parse_fence(std::string_view text);

}  // namespace nxlock::store
