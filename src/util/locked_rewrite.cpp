// locked_rewrite: read, change, write a temporary file, fsync, rename, under an flock.
#include "util/locked_rewrite.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace nxlock::util {

namespace {

[[noreturn]] void fail(const std::string& path, int error) {
  const ErrorKind kind = error == EACCES || error == EPERM || error == EROFS ? ErrorKind::permission
                                                                             : ErrorKind::internal;
  throw Error(kind, path, std::strerror(error));
}

UniqueFd open_or_fail(const std::string& path, int flags, mode_t mode = 0) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC, mode));
  if (!fd) {
    fail(path, errno);
  }
  return fd;
}

// The whole content of `path`, or nullopt if it does not exist.
std::optional<std::string> read_whole(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      return std::nullopt;
    }
    fail(path, errno);
  }
  std::string content;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got == 0) {
      return content;
    }
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(path, errno);
    }
    content.append(buffer, static_cast<std::size_t>(got));
  }
}

void write_whole(int fd, const std::string& path, const std::string& content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t wrote = ::write(fd, content.data() + done, content.size() - done);
    if (wrote < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(path, errno);
    }
    done += static_cast<std::size_t>(wrote);
  }
}

}  // namespace

void locked_rewrite(const std::string& dir, const std::string& name, const std::string& lock_name,
                    const Rewrite& rewrite) {
  const std::string lock_path = dir + "/" + lock_name;
  // The lock file is ours, not the user's: a directory that is missing or
  // refuses us is told as the directory's failure.
  const UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock) {
    fail(dir, errno);
  }
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      fail(lock_path, errno);
    }
  }
  const std::string path = dir + "/" + name;
  const std::string content = rewrite(read_whole(path));

  // Hidden and with its own ending, so that no collector reads it half-written;
  // the pid keeps it ours should a writer without the flock come by.
  const std::string temp_path = dir + "/." + name + "." + std::to_string(getpid()) + ".tmp";
  const UniqueFd temp = open_or_fail(temp_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  try {
    write_whole(temp.get(), temp_path, content);
    if (::fsync(temp.get()) != 0) {
      fail(temp_path, errno);
    }
    if (::rename(temp_path.c_str(), path.c_str()) != 0) {
      fail(path, errno);
    }
  } catch (...) {
    ::unlink(temp_path.c_str());
    throw;
  }
  // The rename lasts a crash only once the directory is on disk too.
  const UniqueFd directory = open_or_fail(dir, O_RDONLY | O_DIRECTORY);
  if (::fsync(directory.get()) != 0) {
    fail(dir, errno);
  }
}

}  // namespace nxlock::util
