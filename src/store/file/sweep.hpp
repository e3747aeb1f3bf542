// The sweep of abandoned locks: expired lock records nobody alive owns, removed a few at a
// time by the owning steps (docs/STORE-FORMAT.md, "Nothing piles up").
#pragma once

#include "store/file/bucket.hpp"

namespace nxlock::store {

// Removes, from the stripe whose lock the caller holds, a few records of other
// keys that only hold expired locks nobody alive owns (and the details written
// beside them): a lock nobody releases does not stay forever. Never throws for
// a record it cannot read (a corrupt one is the user's to look at).
void sweep_abandoned(Buckets& buckets, const Stripe& stripe);

}  // namespace nxlock::store
