// --slots N from a shell: every slot's state, and who holds them when busy.
#pragma once

#include "cli/command_args.hpp"
#include "cli/context.hpp"
#include "lock/lockable.hpp"

namespace nxlock::cli {

// The busy report of a slot lock (CliLock::acquire): every slot held, and by
// whom, briefly; or a free slot that a waiter ahead is taking. False, having
// said nothing, when the key is held by another kind (an exclusive holder, or
// shared ones): the lock's own busy report names them.
bool say_slots_busy(Context& ctx, lock::SlotLock& semaphore, const LockArgs& args);

// `status --slots N KEY`: every slot. Exit 0 when every slot is held (the
// next taker would wait), 1 when at least one is free.
int slots_status(Context& ctx, lock::SlotLock& semaphore);

}  // namespace nxlock::cli
