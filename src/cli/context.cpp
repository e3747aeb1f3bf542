// Context: the backend a command works on, opened lazily.
#include "cli/context.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "store/make_store.hpp"
#include "store/url.hpp"
#include "util/error.hpp"
#include "util/redact.hpp"

namespace nxlock::cli {

namespace {

using util::Error;
using util::ErrorKind;

std::string read_password_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int error = errno;
    throw Error(error == EACCES ? ErrorKind::permission : ErrorKind::usage,
                "password file '" + path + "'", std::strerror(error));
  }
  std::ostringstream text;
  text << file.rdbuf();
  std::string password = text.str();
  // Files written by editors and `echo` end in a newline that is not part of the secret.
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  return password;
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

}  // namespace

store::Store& Context::store() {
  if (m_store) {
    return *m_store;
  }
  store::Url url;
  if (globals.url.empty()) {
    url.scheme = store::Url::Scheme::file;
    url.path = store::default_store_path();
    url.redacted = url.path;
    url.is_default_store = true;
    if (url.path.empty() || url.path[0] != '/') {
      throw Error(ErrorKind::usage, "store '" + url.path + "'", "NXLOCK_STORE must be absolute");
    }
  } else {
    url = store::parse_url(globals.url);
  }

  store::ConnectOptions options;
  options.timeout_seconds = globals.timeout;
  // The most explicit source wins: a file named on the command line, then the
  // URL itself, then the environment (NXLOCK_PASSWORD, redis-cli's REDISCLI_AUTH).
  if (!globals.password_file.empty()) {
    options.password = read_password_file(globals.password_file);
  } else if (!url.password) {
    options.password = env("NXLOCK_PASSWORD");
    if (!options.password) {
      options.password = env("REDISCLI_AUTH");
    }
  }
  if (!globals.sentinel_password_file.empty()) {
    options.sentinel_password = read_password_file(globals.sentinel_password_file);
  } else {
    options.sentinel_password = env("NXLOCK_SENTINEL_PASSWORD");
  }
  options.replicas = globals.replicas;
  options.tls.cacert = globals.cacert;
  options.tls.cacertdir = globals.cacertdir;
  options.tls.cert = globals.cert;
  options.tls.key = globals.key;
  options.tls.sni = globals.sni;
  options.tls.insecure = globals.insecure;
  if (url.tls && globals.insecure) {
    out.note(
        "warning: --insecure: the TLS server's certificate and name are not "
        "verified (" +
        url.redacted + ")");
  }
  for (const auto& secret : {url.password, options.password}) {
    if (secret) {
      m_secrets.push_back(*secret);
    }
  }
  m_store = store::make_store(url, options);
  return *m_store;
}

std::string Context::redact(std::string_view text) const {
  std::vector<std::string> secrets = m_secrets;
  // Also those in the environment that this invocation did not use.
  for (const char* name : {"NXLOCK_PASSWORD", "REDISCLI_AUTH", "NXLOCK_SENTINEL_PASSWORD"}) {
    if (auto value = env(name)) {
      secrets.push_back(std::move(*value));
    }
  }
  return util::redact_secrets(text, secrets);
}

std::string Context::key(std::string_view user_key) const {
  if (user_key.empty()) {
    throw Error(ErrorKind::usage, "key ''",
                "the empty key is refused (an unset variable in a script?)");
  }
  return globals.prefix + std::string(user_key);
}

}  // namespace nxlock::cli
