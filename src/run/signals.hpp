// SignalChannel: turns asynchronous signals into a readable descriptor (signalfd).
#pragma once

#include <signal.h>

#include <optional>

#include "util/fd.hpp"

namespace nxlock::run {

// The signals nxlock passes on to its child (man page, COMMANDS, run-locked).
inline constexpr int k_forwarded_signals[] = {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2};

// While alive, the forwarded signals are blocked and queue on fd() instead of
// killing us, so waits can end cleanly and the child can be told. Not SIGCHLD:
// our one child, the watchdog, reports on a pipe, and it may already run while
// we wait for a lock, where a signal on fd() ends the wait.
class SignalChannel {
 public:
  SignalChannel();
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  // Readable when a signal is pending.
  int fd() const { return m_fd.get(); }

  // The next pending signal's number, or nullopt if none is pending.
  std::optional<int> take();

  // The mask to give a child before exec: the one we started with.
  const sigset_t& original_mask() const { return m_original; }

  // Leaves the signals blocked when this channel goes, for the rest of the
  // process: from here on a signal must not stop us before we have said what
  // we did (a lock taken, its value not yet printed).
  void keep_blocked() { m_keep_blocked = true; }

 private:
  sigset_t m_original{};
  bool m_keep_blocked = false;
  util::UniqueFd m_fd;
};

}  // namespace nxlock::run
