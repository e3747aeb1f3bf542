// The embedded store's directory: opened without following symlinks, created on the first
// write, checked for its owner and its format marker (docs/STORE-FORMAT.md, "Layout").
#include "store/file/store_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

#include "store/file/posix.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/random.hpp"
#include "util/time.hpp"

namespace nxlock::store {

namespace {

using posix::fail;
using util::ErrorKind;

// Format 2: lock records carry their token and owner, and tokens come from one
// store-wide counter. A format 1 store is read as it is, and marked 2 before its
// first token of the new kind, so that an older nxlock refuses it from then on
// (its per-key counters would issue tokens below ours).
constexpr std::string_view k_marker_content = "nxlock-store 2\n";
constexpr std::string_view k_marker_v1 = "nxlock-store 1\n";

}  // namespace

StoreDirectory::StoreDirectory(std::string path, Options options)
    : m_path(std::move(path)), m_options(std::move(options)) {
  // "/x/store/" would resolve a symlink named store despite O_NOFOLLOW.
  while (m_path.size() > 1 && m_path.back() == '/') {
    m_path.pop_back();
  }
}

bool StoreDirectory::open(bool create) {
  if (m_root) {
    return true;
  }
  if (!open_root(create && m_options.create)) {
    return false;
  }
  struct stat st {};
  if (::fstat(m_root.get(), &st) != 0) {
    fail(errno, m_path, "stat");
  }
  if (m_options.require_owner && st.st_uid != ::geteuid()) {
    m_root.reset();
    throw util::Error(ErrorKind::permission, util::escape(m_path),
                      "owned by uid " + std::to_string(st.st_uid) + ", not you");
  }
  // New files and directories inherit the store directory's permission bits, so a
  // private store (0700) stays private and a group store (2770) works for the group.
  m_file_mode = st.st_mode & 0666;
  m_dir_mode = st.st_mode & (S_ISGID | 0777);

  try {
    check_marker();
    m_data = posix::open_subdir(m_root.get(), k_data_name, m_path + "/" + k_data_name, false,
                                m_dir_mode, false);
  } catch (...) {
    m_root.reset();  // never used unchecked
    throw;
  }
  return true;
}

int StoreDirectory::data_dir(bool create) {
  if (!open(create)) {
    return -1;
  }
  if (!m_data) {
    m_data = posix::open_subdir(m_root.get(), k_data_name, m_path + "/" + k_data_name, create,
                                m_dir_mode, m_options.durable);
  }
  return m_data.get();
}

int StoreDirectory::wait_dir(bool create) {
  if (!open(create)) {
    return -1;
  }
  if (!m_wait) {
    m_wait = posix::open_subdir(m_root.get(), k_wait_name, m_path + "/" + k_wait_name, create,
                                m_dir_mode, false);
  }
  return m_wait.get();
}

void StoreDirectory::mark_current_format() {
  if (m_marker_v1) {
    write_marker();
    m_marker_v1 = false;
  }
}

bool StoreDirectory::open_root(bool create) {
  constexpr int k_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(m_path.c_str(), k_flags);
  if (fd < 0 && errno == ENOENT && create) {
    create_root();
    fd = ::open(m_path.c_str(), k_flags);
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      if (!m_options.create) {
        throw util::Error(ErrorKind::unavailable, util::escape(m_path), "no nxlock store here");
      }
      return false;  // nothing there yet: every key is absent
    }
    if (err == ELOOP || err == ENOTDIR) {
      struct stat st {};
      const bool is_link = ::lstat(m_path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        is_link ? "not an nxlock store (a symbolic link, not followed)"
                                : "not an nxlock store (not a directory)");
    }
    fail(err, m_path, "open store directory");
  }
  m_root.reset(fd);
  return true;
}

void StoreDirectory::create_root() {
  // A failure names the path that failed; the default store's names the store
  // too, where it came from and what to do instead (a cron job's HOME may not exist).
  const auto failed = [this](int err, const std::string& path, const std::string& action) {
    if (m_options.create_hint.empty()) {
      fail(err, path, action);
    }
    const std::string what = path == m_path ? action : action + " " + util::escape(path);
    throw util::Error(posix::kind_of(err), util::escape(m_path),
                      what + ": " + posix::reason(err) + " (" + m_options.create_hint + ")");
  };
  // The default store is the user's own, parents too (0700). A path given
  // explicitly honours the umask, and the kernel gives new directories a
  // setgid parent's group: a group can share it.
  const bool private_store = m_options.require_owner;
  const mode_t mode = private_store ? 0700 : 0777;
  for (std::size_t slash = m_path.find('/', 1); slash != std::string::npos;
       slash = m_path.find('/', slash + 1)) {
    const std::string parent = m_path.substr(0, slash);
    if (::mkdir(parent.c_str(), mode) != 0 && errno != EEXIST) {
      failed(errno, parent, "create directory");
    }
  }
  if (::mkdir(m_path.c_str(), mode) != 0) {
    if (errno != EEXIST) {
      failed(errno, m_path, "create store directory");
    }
    return;
  }
  // The umask must not leave us a private store we cannot write.
  if (private_store) {
    const int fd = ::open(m_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      util::UniqueFd made(fd);
      if (::fchmod(fd, 0700) != 0) {
        failed(errno, m_path, "chmod");
      }
    }
  }
}

void StoreDirectory::check_marker() {
  // Twice at most: the marker may appear between our open and our listing, when
  // another process initializes the same empty directory.
  for (int attempt = 0;; ++attempt) {
    const int fd =
        ::openat(m_root.get(), k_marker_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      util::UniqueFd file(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) {
        fail(errno, m_path + "/" + k_marker_name, "stat");
      }
      const std::string content = S_ISREG(st.st_mode) && st.st_size <= 64
                                      ? posix::read_all(fd, m_path + "/" + k_marker_name)
                                      : std::string();
      if (content == k_marker_content) {
        return;
      }
      if (content == k_marker_v1) {
        m_marker_v1 = true;  // marked 2 before its first token (mark_current_format)
        return;
      }
      if (content.starts_with("nxlock-store ")) {
        throw util::Error(ErrorKind::data, util::escape(m_path),
                          "unsupported store format (marker says '" +
                              util::escape(content.substr(0, content.find('\n'))) +
                              "', this nxlock reads 'nxlock-store 1' and 'nxlock-store 2')");
      }
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        "not an nxlock store (unexpected nxlock-store marker)");
    }
    if (errno == ELOOP) {
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        "not an nxlock store (nxlock-store is a symbolic link)");
    }
    if (errno != ENOENT) {
      fail(errno, m_path + "/" + k_marker_name, "open");
    }
    if (directory_is_empty()) {
      write_marker();
      return;
    }
    if (attempt > 0) {
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        "not an nxlock store (no nxlock-store marker, and the directory is not "
                        "empty)");
    }
  }
}

bool StoreDirectory::directory_is_empty() {
  const int fd = ::openat(m_root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fail(errno, m_path, "open store directory");
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(fd);
    fail(err, m_path, "read store directory");
  }
  bool empty = true;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      const int err = errno;
      ::closedir(dir);
      if (err != 0) {
        fail(err, m_path, "read store directory");
      }
      return empty;
    }
    const std::string_view name = entry->d_name;
    // Our own initialization's temporary files (a concurrent or interrupted one) do
    // not make the directory foreign.
    const bool ours = name.starts_with(".nxlock-store.") && name.ends_with(".tmp");
    if (name != "." && name != ".." && !ours) {
      empty = false;
    }
  }
}

void StoreDirectory::write_marker() {
  // Unique per call: two processes, or two threads of one (a quorum's), may
  // initialize the same directory at once, and both renames install the same
  // content. The pid and the time were not enough: two threads in the same
  // microsecond chose one name, and the second removed the first's file as a
  // dead writer's (create_exclusive), whose rename then failed.
  char random_part[17];
  std::snprintf(random_part, sizeof random_part, "%016llx",
                static_cast<unsigned long long>(util::random_u64()));
  const std::string temp =
      ".nxlock-store." + std::to_string(::getpid()) + "-" + random_part + ".tmp";
  const std::string temp_path = m_path + "/" + temp;
  util::UniqueFd file = posix::create_exclusive(m_root.get(), temp, temp_path, m_file_mode);
  posix::write_all(file.get(), k_marker_content, temp_path);
  // Always synced, whatever `durable` says: a marker lost to a power cut would make
  // the whole store look foreign. It is written once per store.
  posix::sync_fd(file.get(), temp_path);
  posix::close_written(std::move(file), temp_path);
  if (::renameat(m_root.get(), temp.c_str(), m_root.get(), k_marker_name) != 0) {
    const int err = errno;
    ::unlinkat(m_root.get(), temp.c_str(), 0);
    fail(err, m_path + "/" + k_marker_name, "rename");
  }
  posix::sync_fd(m_root.get(), m_path);
}

}  // namespace nxlock::store
