// What to do when the embedded store refuses this user: one line naming the store, not its files.
#pragma once

#include "store/url.hpp"
#include "util/error.hpp"

namespace nxlock::store {

// `error` as the user should read it: when it is the embedded store at `url`
// refusing a file of its own to this user (EACCES, EPERM), an error naming the
// store and what to do (doctor's advice: run as its owner, or share it with a
// group); any other error unchanged.
util::Error with_access_advice(const Url& url, const util::Error& error);

}  // namespace nxlock::store
