// The store-wide fencing counter: 20 bytes changed in place under their own flock.
#include "store/file/counter.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

#include "store/fenced_steps.hpp"
#include "store/file/posix.hpp"
#include "util/crc32c.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

namespace {

constexpr const char* k_counter_name = "fence";
constexpr std::string_view k_magic = "NXLF";
constexpr std::size_t k_size = 20;  // magic, version, 3 reserved, i64 token, CRC-32C

std::string encode(std::int64_t token) {
  std::string out(k_magic);
  out.push_back('\x01');
  out.append(3, '\0');
  auto value = static_cast<std::uint64_t>(token);
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>(value & 0xFF));
    value >>= 8;
  }
  std::uint32_t crc = util::crc32c(out);
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>(crc & 0xFF));
    crc >>= 8;
  }
  return out;
}

std::uint64_t little_endian(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) {
    v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return v;
}

}  // namespace

FenceCounter::FenceCounter(int store_fd, const std::string& store_path, mode_t mode, bool durable)
    : m_path(store_path + "/" + k_counter_name), m_durable(durable) {
  const int fd = ::openat(store_fd, k_counter_name,
                          O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) {
    posix::fail(errno, m_path, "open");
  }
  m_fd.reset(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    posix::fail(errno, m_path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    throw util::Error(util::ErrorKind::data, util::escape(m_path),
                      "corrupt fencing counter (not a regular file)");
  }
  // Created just now (by us or a racing process): the store's bits, not the umask's.
  if (st.st_size == 0 && (st.st_mode & 07777) != mode && st.st_uid == ::geteuid()) {
    (void)::fchmod(fd, mode);
  }
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      posix::fail(errno, m_path, "lock");
    }
  }
}

std::int64_t FenceCounter::issue(std::int64_t floor) {
  char buffer[k_size + 1];
  const ssize_t n = ::pread(m_fd.get(), buffer, sizeof buffer, 0);
  if (n < 0) {
    posix::fail(errno, m_path, "read");
  }
  std::int64_t last = 0;
  // Empty: new, or lost to a power cut before its first write-back. Tokens
  // still grow: the floor is the clock.
  if (n != 0) {
    const std::string_view bytes(buffer, static_cast<std::size_t>(n));
    if (bytes.size() != k_size || bytes.substr(0, 4) != k_magic || bytes.substr(4, 4) != std::string_view("\x01\0\0\0", 4) ||
        util::crc32c(bytes.substr(0, 16)) != little_endian(bytes.substr(16, 4))) {
      throw util::Error(util::ErrorKind::data, util::escape(m_path),
                        "corrupt fencing counter (remove it: tokens go on from the clock)");
    }
    last = static_cast<std::int64_t>(little_endian(bytes.substr(8, 8)));
  }
  const auto next = next_token(last, floor);
  if (!next) {
    throw util::Error(util::ErrorKind::data, util::escape(m_path),
                      "fencing counter at its maximum");
  }
  const std::string bytes = encode(*next);
  // In place: one write of 20 bytes at offset 0 is all or nothing for a process
  // that dies, and nobody reads it without this lock.
  const ssize_t written = ::pwrite(m_fd.get(), bytes.data(), bytes.size(), 0);
  if (written != static_cast<ssize_t>(bytes.size())) {
    posix::fail(written < 0 ? errno : EIO, m_path, "write");
  }
  if (m_durable) {
    posix::sync_fd(m_fd.get(), m_path);
  }
  return *next;
}

}  // namespace nxlock::store
