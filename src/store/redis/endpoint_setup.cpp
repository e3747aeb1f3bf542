// Where the URL's server is and how a connection logs in: shared by the store and the doctor.
#include "store/redis/endpoint_setup.hpp"

#include <utility>

namespace nxlock::store::redis {

net::Endpoint endpoint_of(const Url& url, const ConnectOptions& options) {
  net::Endpoint endpoint;
  endpoint.name = url.redacted;
  endpoint.timeout_seconds = options.timeout_seconds;
  if (url.tls) {
    endpoint.tls = net::make_tls_context(options.tls, url.redacted);
  }
  if (url.scheme == Url::Scheme::redis_unix) {
    endpoint.unix_path = url.path;
  } else if (url.scheme != Url::Scheme::redis_sentinel) {
    endpoint.host = url.host;
    endpoint.port = url.port;
  }
  return endpoint;
}

std::optional<std::string> password_of(const Url& url, const ConnectOptions& options) {
  return options.password ? options.password : url.password;
}

Setup auth_setup(const Url& url, const std::optional<std::string>& password) {
  Setup setup;
  if (password) {
    std::vector<std::string> auth{"AUTH"};
    if (url.user) {
      auth.push_back(*url.user);
    }
    auth.push_back(*password);
    setup.push_back(std::move(auth));
  }
  return setup;
}

Setup login_setup(const Url& url, const std::optional<std::string>& password) {
  Setup setup = auth_setup(url, password);
  if (url.db != 0) {
    setup.push_back({"SELECT", std::to_string(url.db)});
  }
  return setup;
}

}  // namespace nxlock::store::redis
