// Process identities from /proc: pid, start time (stat field 22) and boot id.
#include "util/process_identity.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

namespace nxlock::util {

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

std::string read_boot_id() {
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
  const char* last = text.data() + (end == std::string::npos ? text.size() : end);
  if (std::from_chars(text.data() + at, last, stat.start).ec != std::errc()) {
    return std::nullopt;
  }
  return stat;
}

}  // namespace

std::optional<ProcessIdentity> identify_process(std::int64_t pid) {
  // Our own identity never changes: read once (the lock's owner, then the
  // holder's details), and again in a fork, which is another process. Per
  // thread: a quorum asks its stores from threads of its own.
  thread_local std::optional<ProcessIdentity> self;
  const bool ours = pid == static_cast<std::int64_t>(::getpid());
  if (ours && self && self->pid == pid) {
    return self;
  }
  const auto stat = pid > 0 ? read_stat(pid) : std::nullopt;
  if (!stat || this_boot().empty()) {
    return std::nullopt;
  }
  ProcessIdentity identity{pid, stat->start, this_boot()};
  if (ours) {
    self = identity;
  }
  return identity;
}

const std::string& this_boot() {
  static const std::string boot = read_boot_id();
  return boot;
}

bool still_running(const ProcessIdentity& process) {
  if (this_boot().empty() || process.boot != this_boot() || process.pid <= 0) {
    return false;
  }
  const auto stat = read_stat(process.pid);
  // Z (zombie), X (dead), T (stopped), t (traced): nobody renews that lock.
  return stat && stat->start == process.start && stat->state != 'Z' && stat->state != 'X' &&
         stat->state != 'T' && stat->state != 't';
}

}  // namespace nxlock::util
