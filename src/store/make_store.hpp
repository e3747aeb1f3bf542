// make_store: picks the backend for a URL (the factory that hides the backends).
#pragma once

#include <memory>

#include "store/connect_options.hpp"
#include "store/store.hpp"
#include "store/url.hpp"
#include "util/error.hpp"

namespace nxlock::store {

// Opens the backend a URL names. Throws util::Error as Store does.
std::unique_ptr<Store> make_store(const Url& url, const ConnectOptions& options);

// `error` with the advice of the backend `url` names: the embedded store's
// refusal names the store and what to do, not the file that refused.
util::Error with_backend_advice(const Url& url, const util::Error& error);

// The names of the built-in backends, for --version.
const char* builtin_backends();

}  // namespace nxlock::store
