// The embedded store nxlock uses when no URL is given: where it lives, as a URL.
#pragma once

#include <string>

#include "store/url.hpp"

namespace nxlock::store {

// The embedded store's default directory: $NXLOCK_STORE, else
// $XDG_STATE_HOME/nxlock (~/.local/state/nxlock), or /var/lib/nxlock for root.
// Throws util::Error (usage) when none of these gives a place.
std::string default_store_path();

// For a failure to create the default store: where default_store_path() came
// from and what to do instead, e.g. "the default store, from HOME; set
// NXLOCK_STORE or give --url file:///PATH".
std::string default_store_hint();

// default_store_path() as a file URL marked as the per-user default (its owner
// is then checked). Throws util::Error (usage) if the path is not absolute.
Url default_store_url();

}  // namespace nxlock::store
