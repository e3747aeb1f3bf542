// The embedded store's refusals, told as the store's and with doctor's advice (access_advice.hpp).
#include "store/file/access_advice.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/escape.hpp"

namespace nxlock::store {

namespace {

std::string user_name(uid_t uid) {
  const passwd* entry = ::getpwuid(uid);
  return entry != nullptr ? entry->pw_name : "uid " + std::to_string(uid);
}

}  // namespace

std::string existing_parent(std::string path) {
  while (path.size() > 1) {
    const auto slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0) {
      return path;
    }
  }
  return "/";
}

util::Error with_access_advice(const Url& url, const util::Error& error) {
  if (url.scheme != Url::Scheme::file || error.kind() != util::ErrorKind::permission) {
    return error;
  }
  // posix::fail's subjects: the store's own path or one under it; its reasons
  // end in strerror's words (a read-only file system has other advice).
  const std::string shown = util::escape(url.path);
  const std::string& subject = error.subject();
  const bool ours = subject == shown || subject.starts_with(shown + "/");
  const std::string& why = error.reason();
  const bool denied = why.ends_with(std::strerror(EACCES)) || why.ends_with(std::strerror(EPERM));
  if (!ours || !denied) {
    return error;
  }
  struct stat status {};
  if (::lstat(url.path.c_str(), &status) != 0 && errno == ENOENT) {
    // Nothing to share or own yet: the store could not be made where it was asked for.
    const std::string parent = util::escape(existing_parent(url.path));
    return util::Error(util::ErrorKind::permission, "store " + shown,
                       "does not exist, and " + parent + " is not writable by " +
                           user_name(::geteuid()) + "; create " + shown +
                           " for this user, or give a path under a directory it may write; "
                           "nxlock doctor checks it");
  }
  const std::string owner =
      ::stat(url.path.c_str(), &status) == 0 ? " (" + user_name(status.st_uid) + ")" : "";
  return util::Error(util::ErrorKind::permission, "store " + shown,
                     "permission denied to " + user_name(::geteuid()) + "; run as its owner" + owner +
                         ", or share it with a group (chgrp -R GROUP " + shown +
                         "; chmod -R g+rwX " + shown + "; chmod g+s on its directories); " +
                         "nxlock doctor checks it");
}

}  // namespace nxlock::store
