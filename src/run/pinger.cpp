// Pinger: the helper process (fork, URL/start, wait for the end's word, URL or
// URL/N) and nxlock's side of it (the word, the bounded wait, the SIGKILL).
#include "run/pinger.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/poll.hpp"
#include "util/process.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// The helper's process name, as the watchdog's: not "nxlock" (killall).
constexpr const char* k_pinger_name = "nxl-ping";

// The end's word on the command pipe: the exit status, and the instant
// (CLOCK_MONOTONIC, shared by the two processes) nxlock stops waiting.
struct EndWord {
  std::int32_t status;
  std::int64_t deadline;
};

// The helper ends its own work this much before nxlock's deadline, to say
// itself why a ping failed rather than be killed in silence.
Micros margin_of(Micros timeout) {
  return std::min(Micros(50'000), timeout / 10);
}

std::string label_of(int status) {
  return status == 0 ? "success" : "exit status " + std::to_string(status);
}

bool read_word(int fd, EndWord& word) {
  auto* at = reinterpret_cast<char*>(&word);
  std::size_t got = 0;
  while (got < sizeof word) {
    const ssize_t n = read(fd, at + got, sizeof word - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;  // nxlock closed it: no end ping
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

Pinger::Pinger(Config config) : m_config(std::move(config)), m_rid(make_run_id()) {}

Pinger::~Pinger() {
  m_command.reset();
  if (m_pid > 0) {
    // Exiting (its verdict given), or told nothing and ending without an end
    // ping; never waited for: if still there when we exit, init reaps it.
    waitpid(m_pid, nullptr, WNOHANG);
  }
}

bool Pinger::fork_helper(bool send_start) {
  int command[2];
  int done[2];
  if (pipe2(command, O_CLOEXEC) != 0) {
    m_config.note("ping " + m_config.target.url.shown() + " not sent: pipe: " +
                  std::strerror(errno));
    return false;
  }
  util::UniqueFd command_read(command[0]);
  m_command.reset(command[1]);
  if (pipe2(done, O_CLOEXEC) != 0) {
    m_config.note("ping " + m_config.target.url.shown() + " not sent: pipe: " +
                  std::strerror(errno));
    m_command.reset();
    return false;
  }
  m_done.reset(done[0]);
  util::UniqueFd done_write(done[1]);
  const pid_t parent = getpid();
  m_pid = fork();
  if (m_pid < 0) {
    m_config.note("ping " + m_config.target.url.shown() + " not sent: fork: " +
                  std::strerror(errno));
    m_command.reset();
    m_done.reset();
    return false;
  }
  if (m_pid > 0) {
    return true;
  }
  // The helper. Nothing of ours but stderr (for its notes) and its two pipes:
  // no lock file, no store connection, no terminal.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) {
    _exit(1);
  }
  prctl(PR_SET_NAME, k_pinger_name);
  util::close_all_but(STDERR_FILENO, command_read.get(), done_write.get());
  const PingTarget& target = m_config.target;
  bool ok = true;
  if (send_start) {
    const std::string why = send_ping(target, "/start", m_rid, util::mono_now() + m_config.timeout);
    if (!why.empty()) {
      m_config.note("ping " + target.url.shown() + " (start) failed: " + why);
      ok = false;
    }
  }
  EndWord word{};
  if (read_word(command_read.get(), word)) {
    const std::string suffix = word.status == 0 ? "" : "/" + std::to_string(word.status);
    const std::string why = send_ping(target, suffix, m_rid,
                                      Micros(word.deadline) - margin_of(m_config.timeout));
    if (!why.empty()) {
      m_config.note("ping " + target.url.shown() + " (" + label_of(word.status) +
                    ") failed: " + why);
      ok = false;
    }
  }
  // The verdict before the exit: nxlock need not wait for our memory's teardown.
  const char verdict = ok ? '0' : '1';
  (void)!write(done_write.get(), &verdict, 1);
  _exit(ok ? 0 : 1);
}

void Pinger::started() {
  if (m_pid < 0 && !m_finished) {
    fork_helper(true);
  }
}

bool Pinger::finish(int status) {
  if (m_finished) {
    return false;
  }
  m_finished = true;
  const Micros deadline = util::mono_now() + m_config.timeout;
  if (m_pid < 0 && !fork_helper(false)) {
    return false;
  }
  const EndWord word{static_cast<std::int32_t>(status),
                     static_cast<std::int64_t>(deadline.count())};
  // Into an empty pipe's buffer: never blocks. A helper already gone (killed)
  // leaves a broken pipe: MSG_NOSIGNAL is for sockets, so SIGPIPE is blocked
  // around the write as tls.cpp does around OpenSSL's.
  sigset_t pipe_only;
  sigset_t old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const bool written = write(m_command.get(), &word, sizeof word) == sizeof word;
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, SIGPIPE) == 1 && sigismember(&old, SIGPIPE) != 1) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  m_command.reset();
  (void)written;  // a helper that cannot read it ends by itself, and says so

  // The helper's verdict ('0': answered), or end of file if it died without one.
  pollfd entry{m_done.get(), POLLIN, 0};
  char verdict = 0;
  ssize_t got = 0;
  if (util::poll_until(&entry, 1, deadline) > 0) {
    while ((got = read(m_done.get(), &verdict, 1)) < 0 && errno == EINTR) {
    }
  } else {
    kill(m_pid, SIGKILL);
    m_config.note("ping " + m_config.target.url.shown() + " (" + label_of(status) +
                  ") given up after " + util::seconds_text(m_config.timeout) +
                  " (--ping-timeout)");
    while (waitpid(m_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    m_pid = -1;
  }
  m_done.reset();
  return got == 1 && verdict == '0';
}

}  // namespace nxlock::run
