// What to do when the embedded store refuses this user: one line naming the store, not its files.
#pragma once

#include <string>

#include "store/url.hpp"
#include "util/error.hpp"

namespace nxlock::store {

// `error` as the user should read it: when it is the embedded store at `url`
// refusing a file of its own to this user (EACCES, EPERM), an error naming the
// store and what to do (doctor's advice: run as its owner, or share it with a
// group; for a store that does not exist yet, under a directory this user may
// not write, create it for this user or give another path); any other error unchanged.
util::Error with_access_advice(const Url& url, const util::Error& error);

// The nearest directory above `path` that exists: where a missing store would be made.
std::string existing_parent(std::string path);

}  // namespace nxlock::store
