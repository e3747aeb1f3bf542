// The fenced steps' decisions, written once for the stores that decide in C++
// (the embedded store, the memory store). Redis decides in its scripts
// (redis_store.cpp), its own copy of these rules: keep the two in step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nxlock::store {

// The token an owning step issues after the counter's `last` (nullopt: no
// counter yet): last + 1, and at least `floor` (the clock in microseconds, for
// a store whose tokens must go on rising when its counter is lost; 0 for
// none). nullopt if `last` is at its maximum: the step is refused.
std::optional<std::int64_t> next_token(std::optional<std::int64_t> last, std::int64_t floor);

// The token a per-lock counter holds (`text`, nullopt if it is absent). The
// bad-counter refusal: throws util::Error(data) naming `counter` if it holds
// something else than an integer below 2^63, as INCR would fail; a step calls
// it before it writes anything.
std::optional<std::int64_t> counter_token(const std::optional<std::string>& text,
                                          std::string_view counter);

// Whether the holder of `token` still holds the lock by its counter: the
// counter holds `token`, or is absent (lost: every acquisition writes it, so
// none came since it went; the step then writes it back as `token`).
bool counter_holds(std::optional<std::int64_t> counter, std::int64_t token);

// True if a GETSET that returned `old` took the lock over: there was no value,
// or it was a lock timestamp older than `now_seconds` (the page's rule).
bool getset_owns(const std::optional<std::string>& old, std::int64_t now_seconds);

}  // namespace nxlock::store
