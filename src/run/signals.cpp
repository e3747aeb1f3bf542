// SignalChannel: signals as a readable descriptor.
#include "run/signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"

namespace nxlock::run {

SignalChannel::SignalChannel() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : k_forwarded_signals) {
    sigaddset(&set, signo);
  }
  // Blocked, SIGTTOU lets us hand the terminal to the child and take it back.
  sigaddset(&set, SIGTTOU);
  sigprocmask(SIG_BLOCK, &set, &m_original);
  sigdelset(&set, SIGTTOU);
  m_fd.reset(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!m_fd) {
    throw util::Error(util::ErrorKind::internal, "signalfd", std::strerror(errno));
  }
}

SignalChannel::~SignalChannel() {
  if (!m_keep_blocked) {
    sigprocmask(SIG_SETMASK, &m_original, nullptr);
  }
}

std::optional<int> SignalChannel::take() {
  signalfd_siginfo info{};
  for (;;) {
    const ssize_t n = read(m_fd.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      return static_cast<int>(info.ssi_signo);
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return std::nullopt;
  }
}

}  // namespace nxlock::run
