// Who wrote a lock, and whether that process still runs: the embedded store keeps a
// lock held past its timestamp while its owner lives (docs/STORE-FORMAT.md, "Owners").
#pragma once

#include <optional>
#include <string>

#include "store/file/record.hpp"

namespace nxlock::store::owner {

// This process, as a lock's owner; nullopt where /proc does not say (then
// nothing is recorded, and the lock's timestamp alone decides, as before).
const std::optional<record::Owner>& self();

// This boot's id (/proc/sys/kernel/random/boot_id), read once; empty where
// /proc does not say.
const std::string& this_boot();

// True if `owner` is running now on this boot: the same pid, started at the
// same tick, and not stopped (a stopped or traced holder renews nothing: its
// lock keeps its timestamp's meaning). Anything /proc does not confirm is not alive.
bool alive(const record::Owner& owner);

// True if `entry` is a lock that this host's clock may call expired but whose
// owner still runs: a live run-locked renews it, and only its timestamp is
// behind (a clock step, a caller's skewed clock). Liveness only keeps a lock.
// A caller that is the owner itself is not kept out by its own liveness.
bool keeps_held(const record::Entry& entry);

}  // namespace nxlock::store::owner
