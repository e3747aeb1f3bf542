// The default store: NXLOCK_STORE, else root's, else the user's XDG state directory.
#include "store/default_store.hpp"

#include <unistd.h>

#include <cstdlib>

#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

std::string default_store_path() {
  if (const char* explicit_store = std::getenv("NXLOCK_STORE"); explicit_store && *explicit_store) {
    return explicit_store;
  }
  if (geteuid() == 0) {
    return "/var/lib/nxlock";
  }
  // XDG requires an absolute path; a relative one is ignored as the spec says.
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && state[0] == '/') {
    return std::string(state) + "/nxlock";
  }
  if (const char* home = std::getenv("HOME"); home && home[0] == '/') {
    return std::string(home) + "/.local/state/nxlock";
  }
  throw util::Error(util::ErrorKind::usage, "default store",
                    "neither NXLOCK_STORE nor HOME is set; give --url file:///PATH");
}

Url default_store_url() {
  Url url;
  url.scheme = Url::Scheme::file;
  url.path = default_store_path();
  url.redacted = util::escape(url.path);
  url.is_default_store = true;
  if (url.path.empty() || url.path[0] != '/') {
    throw util::Error(util::ErrorKind::usage, "store '" + util::escape(url.path) + "'",
                      "NXLOCK_STORE must be absolute");
  }
  return url;
}

}  // namespace nxlock::store
