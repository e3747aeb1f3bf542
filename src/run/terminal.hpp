// TerminalHandoff: the terminal's foreground, the job's while it runs and ours again after.
#pragma once

#include <unistd.h>

#include <utility>

namespace nxlock::run {

// Hands the terminal's foreground to the job's group while it runs, so it can
// read the terminal and Ctrl-C reaches the whole job; gives it back when this
// goes.
class TerminalHandoff {
 public:
  TerminalHandoff() { m_active = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp(); }
  TerminalHandoff(TerminalHandoff&& other) noexcept
      : m_active(std::exchange(other.m_active, false)) {}
  TerminalHandoff(const TerminalHandoff&) = delete;
  TerminalHandoff& operator=(const TerminalHandoff&) = delete;
  TerminalHandoff& operator=(TerminalHandoff&&) = delete;
  ~TerminalHandoff() {
    if (m_active) {
      tcsetpgrp(STDIN_FILENO, getpgrp());  // SIGTTOU is blocked by SignalChannel
    }
  }

  // Whether the terminal is ours to hand over: we are its foreground.
  bool active() const { return m_active; }
  void give(pid_t group) const {
    if (m_active) {
      tcsetpgrp(STDIN_FILENO, group);
    }
  }

 private:
  bool m_active = false;
};

}  // namespace nxlock::run
