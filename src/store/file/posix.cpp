// POSIX file helpers for the embedded store (see posix.hpp).
#include "store/file/posix.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/escape.hpp"

namespace nxlock::store::posix {

using util::ErrorKind;

ErrorKind kind_of(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return ErrorKind::permission;
    case ELOOP:    // O_NOFOLLOW met a symlink where the store keeps its own files
    case ENOTDIR:  // something that is not a directory where one should be
    case EISDIR:
      return ErrorKind::data;
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return ErrorKind::unavailable;
    default:
      return ErrorKind::internal;
  }
}

std::string reason(int err) {
  // With O_NOFOLLOW, ELOOP means the last component is a symlink: say so plainly.
  return err == ELOOP ? "is a symbolic link (not followed)" : std::strerror(err);
}

[[noreturn]] void fail(int err, const std::string& path, const std::string& action) {
  throw util::Error(kind_of(err), util::escape(path), action + ": " + reason(err));
}

std::string read_all(int fd, const std::string& path, std::size_t size) {
  std::string bytes;
  char buffer[65536];
  while (bytes.size() < size) {
    const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, size - bytes.size()));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(errno, path, "read");
    }
    if (n == 0) {
      return bytes;
    }
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  return bytes;
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(errno, path, "write");
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void sync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) {
    fail(errno, path, "fsync");
  }
}

void close_written(util::UniqueFd fd, const std::string& path) {
  if (::close(fd.release()) != 0 && errno != EINTR) {
    fail(errno, path, "close");
  }
}

util::UniqueFd open_subdir(int parent, const char* name, const std::string& path, bool create,
                           mode_t mode, bool durable) {
  bool made = false;
  bool tried_mkdir = false;
  for (;;) {
    const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      util::UniqueFd dir(fd);
      if (made) {
        // mkdirat() honours the umask; set the bits exactly so a group-shared store
        // stays writable by its group.
        if (::fchmod(fd, mode) != 0) {
          fail(errno, path, "chmod");
        }
        if (durable) {
          sync_fd(parent, path);
        }
      }
      return dir;
    }
    if (errno != ENOENT || tried_mkdir) {
      fail(errno, path, "open directory");
    }
    if (!create) {
      return {};
    }
    tried_mkdir = true;
    if (::mkdirat(parent, name, mode) == 0) {
      made = true;
    } else if (errno != EEXIST) {  // EEXIST: another process made it first
      fail(errno, path, "create directory");
    }
  }
}

util::UniqueFd create_exclusive(int dir, const std::string& name, const std::string& path,
                                mode_t mode) {
  for (int attempt = 0;; ++attempt) {
    const int fd =
        ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
      util::UniqueFd file(fd);
      // Like mkdirat(), open() honours the umask: set the store's bits exactly.
      if (::fchmod(fd, mode) != 0) {
        fail(errno, path, "chmod");
      }
      return file;
    }
    if (errno != EEXIST || attempt > 0) {
      fail(errno, path, "create");
    }
    // A temporary file left by a writer that died mid-write. Whoever may write
    // this name holds the lock we hold now, so it is stale: remove it.
    if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
      fail(errno, path, "remove stale temporary file");
    }
  }
}

std::vector<std::string> hex_names(int dir, std::size_t length) {
  std::vector<std::string> names;
  // A descriptor of its own, for its own offset; read with getdents64 into the
  // stack, not through a DIR, whose buffer grew and shrank the heap, with an
  // fstat and fcntl calls besides, on every owning step (sweep.cpp;
  // BENCHMARKS.md, "Where the time goes").
  const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return names;
  }
  alignas(dirent64) char buffer[4096];
  for (;;) {
    const ssize_t got = ::getdents64(fd, buffer, sizeof buffer);
    if (got <= 0) {
      break;  // the end, or an error: what was read is the answer, as with readdir
    }
    for (ssize_t at = 0; at < got;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
      const std::string_view name = entry->d_name;
      if (name.size() == length &&
          name.find_first_not_of("0123456789abcdef") == std::string_view::npos) {
        names.emplace_back(name);
      }
      at += entry->d_reclen;
    }
  }
  ::close(fd);
  return names;
}

}  // namespace nxlock::store::posix
