// Process helpers.
#include "util/process.hpp"

#include <signal.h>
#include <string.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "util/fd.hpp"

namespace nxlock::util {

std::string process_command_line(pid_t pid, std::size_t max_length) {
  const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string text(max_length + 1, '\0');
  const ssize_t n = fd ? read(fd.get(), text.data(), text.size()) : -1;
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && text.back() == '\0') {
    text.pop_back();
  }
  for (auto& c : text) {
    if (c == '\0') {
      c = ' ';
    }
  }
  if (text.size() > max_length) {
    text.resize(max_length);
  }
  return text;
}

bool fill_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) {
      continue;
    }
    // open() returns the lowest free descriptor: this one, as the lower ones are open.
    // Not close-on-exec: a child run by run-locked gets the same three.
    const int opened = open("/dev/null", O_RDWR);
    if (opened != fd) {
      if (opened >= 0) {
        close(opened);
      }
      return false;
    }
  }
  return true;
}

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

void close_all_but(int a, int b, int c) {
  int keep[] = {a, b, c};
  std::sort(std::begin(keep), std::end(keep));
  int from = 0;
  for (const int fd : keep) {
    for (int each = from; each < fd; ++each) {
      close(each);
    }
    from = fd + 1;
  }
  if (close_range(static_cast<unsigned>(from), ~0U, 0) == 0) {
    return;
  }
  rlimit limit{};  // close_range() needs Linux 5.9
  getrlimit(RLIMIT_NOFILE, &limit);
  const int top = limit.rlim_cur == RLIM_INFINITY ? 65536 : static_cast<int>(limit.rlim_cur);
  for (int fd = from; fd < top; ++fd) {
    close(fd);
  }
}

}  // namespace nxlock::util
