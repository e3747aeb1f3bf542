// Where the URL's server is and how a connection logs in: shared by the store and the doctor.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/connect_options.hpp"
#include "store/net/endpoint.hpp"
#include "store/url.hpp"

namespace nxlock::store::redis {

// A connection's setup commands (AUTH, SELECT, SUBSCRIBE), sent at every connect.
using Setup = std::vector<std::vector<std::string>>;

// The URL's server: its name for messages, the timeout, TLS, and the unix
// socket or host and port. A redis+sentinel:// URL's has no address: the
// caller says how to find the master (a Locator, or asking the Sentinels).
net::Endpoint endpoint_of(const Url& url, const ConnectOptions& options);

// The password to log in with: --password-file's or the environment's over the URL's.
std::optional<std::string> password_of(const Url& url, const ConnectOptions& options);

// AUTH [USER] PASSWORD, if there is a password.
Setup auth_setup(const Url& url, const std::optional<std::string>& password);

// AUTH as auth_setup, then SELECT the URL's db unless it is 0.
Setup login_setup(const Url& url, const std::optional<std::string>& password);

}  // namespace nxlock::store::redis
