// make_store: picks the backend for a URL (the factory that hides the backends).
#pragma once

#include <memory>

#include "store/connect_options.hpp"
#include "store/store.hpp"
#include "store/url.hpp"

namespace nxlock::store {

// Opens the backend a URL names. Throws util::Error as Store does.
std::unique_ptr<Store> make_store(const Url& url, const ConnectOptions& options);

// The names of the built-in backends, for --version.
const char* builtin_backends();

}  // namespace nxlock::store
