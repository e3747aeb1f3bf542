// Context: the backend a command works on, opened lazily.
#include "cli/context.hpp"

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "store/default_store.hpp"
#include "store/make_store.hpp"
#include "store/url.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
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
                "password file '" + util::escape(path) + "'", std::strerror(error));
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

std::vector<std::string> Context::url_list() const {
  std::vector<std::string> list;
  for (const auto& given : globals.urls) {
    std::vector<std::string> words;
    std::size_t at = 0;
    while ((at = given.find_first_not_of(" \t\n", at)) != std::string::npos) {
      const std::size_t end = given.find_first_of(" \t\n", at);
      words.push_back(given.substr(at, end - at));
      at = end;
    }
    // A file:// path may hold a space: split only a list of URLs.
    const bool all_urls = std::all_of(words.begin(), words.end(), [](const std::string& word) {
      return word.find("://") != std::string::npos;
    });
    if (words.size() > 1 && all_urls) {
      list.insert(list.end(), words.begin(), words.end());
    } else if (!given.empty()) {
      list.push_back(given);
    }
  }
  return list;
}

std::pair<store::Url, store::ConnectOptions> Context::prepare(const std::string& url_text) {
  const store::Url url =
      url_text.empty() ? store::default_store_url() : store::parse_url(url_text);
  store::ConnectOptions options;
  options.timeout_seconds = globals.io_timeout;
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
  options.for_locks = takes_locks;
  options.renews_while_alive = renews_while_alive;
  options.warn = [this](const std::string& text) { out.note(text); };
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
  return {std::move(url), std::move(options)};
}

store::Store& Context::store() {
  if (m_store) {
    return *m_store;
  }
  const auto urls = url_list();
  if (urls.size() > 1) {
    throw Error(ErrorKind::usage, "--url",
                std::to_string(urls.size()) +
                    " URLs given: setnx, get, getset and del work on one server (the lock "
                    "commands take a quorum of several)");
  }
  const auto [url, options] = prepare(urls.empty() ? std::string() : urls.front());
  m_store = store::make_store(url, options);
  return *m_store;
}

util::Error Context::with_advice(const util::Error& error) const {
  const auto urls = url_list();
  if (urls.size() > 1) {
    return error;
  }
  try {
    return store::with_backend_advice(
        urls.empty() ? store::default_store_url() : store::parse_url(urls.front()), error);
  } catch (const Error&) {
    return error;  // no URL to advise about: the error says what it says
  }
}

lock::LockSpace& Context::locks() {
  if (m_locks) {
    return *m_locks;
  }
  const auto urls = url_list();
  std::vector<lock::Place> places;
  for (const auto& given : urls.empty() ? std::vector<std::string>{std::string()} : urls) {
    // Parsed here, on this thread: a bad URL is a usage error before any connect.
    auto [url, options] = prepare(given);
    places.push_back({given, std::move(url), std::move(options)});
  }
  m_locks = lock::open_lock_space(std::move(places));
  return *m_locks;
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
