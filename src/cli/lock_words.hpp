// How a lock's state is said, on stderr and in --json: holder records,
// verdicts, distances in time, and the leased holders of a busy lock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "lock/lockable.hpp"

namespace nxlock::cli {

// What a user can do about a lock whose holder is gone.
std::string gone_advice(std::string_view key);

// A verdict in words, for stderr (unlock, renew, run-locked), and as a stable
// token for --json (scripts match on it).
const char* verdict_reason(lock::Verdict verdict);
const char* verdict_token(lock::Verdict verdict);

// A holder record for --json and for a message (its command redacted, as
// records of other clients may hold a password; "no longer running" when gone).
nlohmann::json holder_json(const lock::Holder& holder);
// `say_gone`: add ", no longer running" when the holder is gone (not where the
// caller says why: a --hold whose job finished).
std::string holder_text(const lock::Holder& holder, bool say_gone = true);

// A lock held by --shared (or --slots) holders has no holder of its own:
// " by N shared holders: pid … on HOST (…), …" names them (the first few) for
// the busy message, and --json's "shared" lists them all, and "kind" says
// which kind they are. Empty when no leased holder holds it. Throws as
// Lockable::status() does.
std::string busy_shared_holders(Context& ctx, lock::Lockable& lock);

// "in 42s" / "3s ago" style distance between two Unix times.
std::string describe_distance(std::int64_t from, std::int64_t to);

}  // namespace nxlock::cli
