// Lock owners: a process named by pid, start time and boot id, checked in /proc.
#include "store/file/owner.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string>

namespace nxlock::store::owner {

namespace {

// A small /proc file's text, or "" if it cannot be read.
std::string read_small(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return {};
  }
  std::string text;
  char buffer[1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      break;
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > 8192) {
      break;
    }
  }
  ::close(fd);
  return text;
}

std::string boot_id() {
  std::string id = read_small("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) {
    id.pop_back();
  }
  return id;
}

struct ProcStat {
  char state = '?';
  std::uint64_t start = 0;
};

// /proc/PID/stat: the state (field 3) and the start time (field 22). The
// command (field 2) may hold spaces and parentheses: fields are counted after
// its last ')'.
std::optional<ProcStat> read_stat(std::int64_t pid) {
  const std::string text = read_small("/proc/" + std::to_string(pid) + "/stat");
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) {
    return std::nullopt;
  }
  ProcStat stat;
  stat.state = text[close + 2];
  std::size_t at = close + 2;
  // Field 3 starts at `at`; field 22 is 19 fields further.
  for (int field = 3; field < 22; ++field) {
    at = text.find(' ', at);
    if (at == std::string::npos) {
      return std::nullopt;
    }
    ++at;
  }
  const auto end = text.find(' ', at);
  const auto [ptr, ec] = std::from_chars(text.data() + at,
                                         text.data() + (end == std::string::npos ? text.size() : end),
                                         stat.start);
  if (ec != std::errc()) {
    return std::nullopt;
  }
  (void)ptr;
  return stat;
}

}  // namespace

const std::optional<record::Owner>& self() {
  // Read once per process (a forked child is another process: read again).
  static std::optional<record::Owner> me;
  static std::int64_t read_for = 0;
  const auto pid = static_cast<std::int64_t>(::getpid());
  if (read_for != pid) {
    read_for = pid;
    me.reset();
    const auto stat = read_stat(pid);
    std::string boot = boot_id();
    if (stat && !boot.empty()) {
      me = record::Owner{pid, stat->start, std::move(boot)};
    }
  }
  return me;
}

const std::string& this_boot() {
  static const std::string boot = boot_id();
  return boot;
}

bool alive(const record::Owner& owner) {
  if (this_boot().empty() || owner.boot != this_boot() || owner.pid <= 0) {
    return false;
  }
  const auto stat = read_stat(owner.pid);
  // Z (zombie), X (dead), T (stopped), t (traced): nobody renews that lock.
  return stat && stat->start == owner.start && stat->state != 'Z' && stat->state != 'X' &&
         stat->state != 'T' && stat->state != 't';
}

}  // namespace nxlock::store::owner
