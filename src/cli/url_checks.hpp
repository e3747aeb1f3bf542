// The backend's URLs as given (-u, NXLOCK_URL): the ones refused before any
// backend is opened, and the line -v prints to name the backend in use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace nxlock::cli {

// Why `urls` (each -u as given, or NXLOCK_URL's value when no -u was) must be
// refused before anything is taken: an empty -u, alone or one of several; a
// set but blank NXLOCK_URL (`environment`, null when unset); a list (-u or
// NXLOCK_URL) with an empty item, as "$A $B" is when B is unset; a -u whose
// value is no URL at all, as when `-u` swallowed the KEY. An empty URL would
// fall back to the per-host embedded store, and a quorum short of a server
// counts another majority than its peers: a fleet's job would run on every
// host. nullopt when none of these holds. The error is a usage one (64).
std::optional<util::Error> refuse_urls(const std::vector<std::string>& urls,
                                       const char* environment);

// "the embedded store /var/lib/nxlock", "Redis redis://h:6379/0",
// "a quorum of 3 servers (a majority is 2): URL URL URL", ...: the backend
// that `url_list` (Context::url_list(): empty for the default store) names,
// with its store path or servers, passwords redacted. Throws util::Error for a
// URL that does not parse (the command then says so as it always does).
std::string backend_summary(const std::vector<std::string>& url_list);

}  // namespace nxlock::cli
