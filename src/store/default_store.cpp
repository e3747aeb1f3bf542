// The default store: NXLOCK_STORE, else root's, else the user's XDG state directory.
#include "store/default_store.hpp"

#include <unistd.h>

#include <cstdlib>

#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

namespace {

// The default directory, and where it came from (for messages).
struct DefaultStore {
  std::string path;
  std::string origin;
};

DefaultStore find_default_store() {
  if (const char* explicit_store = std::getenv("NXLOCK_STORE"); explicit_store && *explicit_store) {
    return {explicit_store, "NXLOCK_STORE"};
  }
  if (geteuid() == 0) {
    return {"/var/lib/nxlock", "root's"};
  }
  // XDG requires an absolute path; a relative one is ignored as the spec says.
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && state[0] == '/') {
    return {std::string(state) + "/nxlock", "XDG_STATE_HOME"};
  }
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') {
    return {std::string(home) + "/.local/state/nxlock", "HOME"};
  }
  if (home && home[0] != '\0') {
    // Relative to what? A store must be the same one from every directory.
    throw util::Error(util::ErrorKind::usage, "default store",
                      "HOME '" + util::escape(home) +
                          "' is not an absolute path and NXLOCK_STORE is not set; give --url "
                          "file:///PATH or NXLOCK_STORE=/PATH");
  }
  throw util::Error(util::ErrorKind::usage, "default store",
                    "neither NXLOCK_STORE nor HOME is set; give --url file:///PATH");
}

}  // namespace

std::string default_store_path() {
  return find_default_store().path;
}

std::string default_store_hint() {
  const std::string origin = find_default_store().origin;
  if (origin == "NXLOCK_STORE") {
    return "the default store, from NXLOCK_STORE; set it to a directory you can create, or give "
           "--url file:///PATH";
  }
  if (origin == "root's") {
    return "root's default store; set NXLOCK_STORE or give --url file:///PATH";
  }
  return "the default store, from " + origin + "; set NXLOCK_STORE or give --url file:///PATH";
}

Url default_store_url() {
  const DefaultStore found = find_default_store();
  Url url;
  url.scheme = Url::Scheme::file;
  url.path = found.path;
  url.redacted = util::escape(url.path);
  url.no_url = true;
  // NXLOCK_STORE names a path as file:// does: made as the umask says, so that
  // a group may share it (man page, "URLS").
  url.is_default_store = found.origin != "NXLOCK_STORE";
  if (url.path.empty() || url.path[0] != '/') {
    throw util::Error(util::ErrorKind::usage, "store '" + util::escape(url.path) + "'",
                      "NXLOCK_STORE must be absolute");
  }
  return url;
}

}  // namespace nxlock::store
