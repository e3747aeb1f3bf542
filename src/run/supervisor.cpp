// Supervisor: fork/exec, signal forwarding, renewal and the lost-lock policy.
#include "run/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// Renewing retries this often while the backend fails, until the lock would expire.
constexpr Micros k_retry_interval{500'000};

// The watchdog's process name: not "nxlock", nor containing it, nor 15 characters
// long (killall then compares the command line, which the watchdog shares with us).
constexpr const char* k_watchdog_name = "nxl-watchdog";

// Runs in the vfork()ed child, which shares our memory until it execs: only
// system calls here, no allocation (argv is built before the fork).
[[noreturn]] void exec_child(char* const* argv, const SignalChannel& signals, int error_pipe,
                             int watchdog_pipe, pid_t parent, bool take_terminal) {
  setpgid(0, 0);
  // The job's group, told to the watchdog before the job can start anything:
  // from here on, our death (even before exec) takes the whole group with it.
  if (watchdog_pipe >= 0) {
    const pid_t group = getpid();
    [[maybe_unused]] auto told = write(watchdog_pipe, &group, sizeof group);
  }
  if (take_terminal) {
    // Both sides call tcsetpgrp so the child owns the terminal before it can read it.
    tcsetpgrp(STDIN_FILENO, getpid());
  }
  // If nxlock dies, even by SIGKILL, the job must not outlive the lock that guards it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) {
    _exit(128 + SIGKILL);  // the parent died before the line above took effect
  }
  signal(SIGPIPE, SIG_DFL);  // ignored dispositions survive exec; the child gets the default
  sigprocmask(SIG_SETMASK, &signals.original_mask(), nullptr);
  execvp(argv[0], argv);

  const int error = errno;
  [[maybe_unused]] auto written = write(error_pipe, &error, sizeof error);
  _exit(error == ENOENT ? 127 : 126);
}

int status_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return 128 + WTERMSIG(wait_status);
  }
  return WEXITSTATUS(wait_status);
}

// Hands the terminal's foreground to the child's group while it runs, so it can
// read the terminal and Ctrl-C reaches the whole job; gives it back afterwards.
class TerminalHandoff {
 public:
  TerminalHandoff() {
    m_active = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  }
  bool active() const { return m_active; }
  void give(pid_t group) const {
    if (m_active) {
      tcsetpgrp(STDIN_FILENO, group);
    }
  }
  ~TerminalHandoff() {
    if (m_active) {
      tcsetpgrp(STDIN_FILENO, getpgrp());  // SIGTTOU is blocked by SignalChannel
    }
  }

 private:
  bool m_active = false;
};

// PR_SET_PDEATHSIG reaches only the direct child, so a `sh -c 'a | b'` job would
// outlive a SIGKILLed nxlock. A watchdog process waits on a pipe only we (and,
// until it execs, the child) can write: the child writes its process group, and
// end-of-file without a "done" byte means we died, so the watchdog kills that
// whole group. It leaves quietly when disarmed.
//
// The kills that take nxlock must not take the watchdog too: it has its own
// process group (`timeout -s KILL`, `kill -9 -PGID` reach only ours) and its own
// name, k_watchdog_name (`killall -9 nxlock` and `pkill nxlock` match the name;
// its command line is still ours, as it shares our memory, so `pkill -f` would).
//
// It is a clone() sharing our memory (no page tables copied, so it costs a
// fraction of a fork) but with its own descriptor table; it runs on its own
// small stack and makes system calls only. Sharing memory ends when we exit or
// die: the kernel keeps the memory alive for the watchdog alone.
class JobWatchdog {
 public:
  // Started before the job, so that no moment of the job's life is unwatched.
  JobWatchdog() {
    // Every watchdog runs on the one stack below: a disarmed one that may still
    // be on it (a second run in this process, as in the unit tests) goes first.
    wait_for_last();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return;  // best effort: the direct child still has its parent-death signal
    }
    s_arguments = {fds[0], fds[1]};
    s_unreaped = clone(&JobWatchdog::watch, s_stack + sizeof s_stack, CLONE_VM | SIGCHLD,
                       &s_arguments);
    close(fds[0]);
    m_pipe.reset(fds[1]);
    if (s_unreaped < 0) {
      m_pipe.reset();
    } else {
      setpgid(s_unreaped, s_unreaped);  // as the watchdog does: whichever runs first
    }
  }
  JobWatchdog(const JobWatchdog&) = delete;
  JobWatchdog& operator=(const JobWatchdog&) = delete;

  // Where the child writes its process group; -1 without a watchdog.
  int pipe() const { return m_pipe ? m_pipe.get() : -1; }

  // The job ended under our watch: let the watchdog go without killing anything.
  // Not waited for here: it exits on its own at once, and waiting now would put
  // a wake-up of another CPU between the job's end and the lock's release.
  // wait_for_last() collects it later.
  void disarm() {
    if (m_pipe) {
      const char done = 'd';
      [[maybe_unused]] auto written = write(m_pipe.get(), &done, 1);
      m_pipe.reset();
    }
  }

  // Not disarmed (we are failing with the job still running): closing the pipe
  // makes the watchdog stop the job, as if we had died; we wait until it has.
  ~JobWatchdog() {
    if (m_pipe) {
      m_pipe.reset();
      wait_for_last();
    }
  }

  // Waits until the last watchdog started has exited (at once if there is none).
  static void wait_for_last() {
    if (s_unreaped > 0) {
      while (waitpid(s_unreaped, nullptr, 0) < 0 && errno == EINTR) {
      }
      s_unreaped = -1;
    }
  }

 private:
  struct Arguments {
    int read_end;
    int write_end;
  };

  static int watch(void* raw) {
    const Arguments arguments = *static_cast<Arguments*>(raw);
    // Out of nxlock's process group and under another name (see above); the
    // signals a group or a terminal sends must not take the watchdog away first.
    setpgid(0, 0);
    prctl(PR_SET_NAME, k_watchdog_name);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    // Hold none of our descriptors: not the write end (or end-of-file never
    // comes), not the child's exec-error pipe, not a pipe of the caller's past
    // our life, nor a store's lock.
    close_all_but(arguments.read_end);
    // The job's group (from the child), then a "done" byte from us, or end-of-file.
    pid_t group = 0;
    if (!read_exactly(arguments.read_end, &group, sizeof group) || group <= 0) {
      _exit(0);  // we died before the job started: its child has PR_SET_PDEATHSIG
    }
    char done = 0;
    if (!read_exactly(arguments.read_end, &done, 1)) {
      kill(-group, SIGKILL);
    }
    _exit(0);
  }

  static void close_all_but(int keep) {
    const auto last = static_cast<unsigned>(keep);
    if ((keep == 0 || close_range(0, last - 1, 0) == 0) && close_range(last + 1, ~0U, 0) == 0) {
      return;
    }
    rlimit limit{};  // close_range() needs Linux 5.9
    getrlimit(RLIMIT_NOFILE, &limit);
    const int top = limit.rlim_cur == RLIM_INFINITY ? 65536 : static_cast<int>(limit.rlim_cur);
    for (int fd = 0; fd < top; ++fd) {
      if (fd != keep) {
        close(fd);
      }
    }
  }

  static bool read_exactly(int fd, void* buffer, std::size_t size) {
    auto* at = static_cast<char*>(buffer);
    while (size > 0) {
      const ssize_t got = read(fd, at, size);
      if (got <= 0) {
        return false;  // every signal is blocked: no EINTR, so this is end-of-file
      }
      at += got;
      size -= static_cast<std::size_t>(got);
    }
    return true;
  }

  alignas(64) static inline char s_stack[16 * 1024];
  static inline Arguments s_arguments;
  static inline pid_t s_unreaped = -1;  // the last watchdog started, until it is waited for
  util::UniqueFd m_pipe;
};

}  // namespace

void wait_for_watchdog() { JobWatchdog::wait_for_last(); }

RunOutcome supervise(lock::Lock& lock, std::string& value, const RunOptions& options,
                     SignalChannel& signals, const Warn& warn) {
  RunOutcome outcome;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw util::Error(util::ErrorKind::internal, "pipe", std::strerror(errno));
  }
  util::UniqueFd error_read(pipe_fds[0]);
  util::UniqueFd error_write(pipe_fds[1]);

  setenv("NXLOCK_KEY", lock.key().c_str(), 1);
  setenv("NXLOCK_VALUE", value.c_str(), 1);

  std::vector<char*> argv;
  argv.reserve(options.command.size() + 1);
  for (const auto& arg : options.command) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);

  TerminalHandoff terminal;
  JobWatchdog watchdog;
  const pid_t parent = getpid();
  // vfork: the child borrows our memory until exec instead of copying page
  // tables, which is a measurable part of a short job's cost (BENCHMARKS.md).
  const pid_t child = vfork();
  if (child < 0) {
    throw util::Error(util::ErrorKind::internal, "fork", std::strerror(errno));
  }
  if (child == 0) {
    exec_child(argv.data(), signals, error_write.get(), watchdog.pipe(), parent, terminal.active());
  }
  setpgid(child, child);  // also here, so the group exists before we signal it
  terminal.give(child);
  error_write.reset();

  // The child closes the pipe by exec'ing (O_CLOEXEC) or writes errno.
  int exec_error = 0;
  ssize_t got;
  do {
    got = read(error_read.get(), &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof exec_error)) {
    int ignored;
    while (waitpid(child, &ignored, 0) < 0 && errno == EINTR) {
    }
    watchdog.disarm();
    outcome.ending = exec_error == ENOENT ? RunOutcome::Ending::not_found
                                          : RunOutcome::Ending::not_executable;
    outcome.status = exec_error == ENOENT ? 127 : 126;
    outcome.detail = std::strerror(exec_error);
    return outcome;
  }
  // Only now: the details are advisory, and the job need not wait for them.
  lock.record_holder(options.holder);

  const Micros interval = std::max(Micros(options.ttl * 1'000'000 / 3), Micros(100'000));
  Micros next_renew = util::mono_now() + interval;
  Micros lock_expires = util::mono_now() + Micros(options.ttl * 1'000'000);
  std::optional<Micros> kill_at;
  const auto signal_job = [&](int signo) {
    if (kill(-child, signo) != 0) {
      kill(child, signo);  // the group may be gone while the child lingers
    }
  };
  const auto lose = [&](const std::string& why) {
    outcome.lost = true;
    warn("lock '" + lock.key() + "' lost: " + why);
    switch (options.on_lost) {
      case OnLost::term:
        warn("stopping the job (SIGTERM, SIGKILL after the grace period)");
        signal_job(SIGTERM);
        kill_at = util::mono_now() + options.kill_after;
        break;
      case OnLost::kill:
        warn("stopping the job (SIGKILL)");
        signal_job(SIGKILL);
        break;
      case OnLost::ignore:
        warn("the job keeps running (--on-lost ignore)");
        break;
    }
  };

  for (;;) {
    const Micros now = util::mono_now();
    Micros timeout = Micros::max();
    if (options.renew && !outcome.lost) {
      timeout = std::min(timeout, next_renew - now);
    }
    if (kill_at) {
      timeout = std::min(timeout, *kill_at - now);
    }
    const int timeout_ms =
        timeout == Micros::max()
            ? -1
            : static_cast<int>(std::max<std::int64_t>(0, (timeout.count() + 999) / 1000));
    pollfd pfd{signals.fd(), POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR) {
      throw util::Error(util::ErrorKind::internal, "poll", std::strerror(errno));
    }

    while (const auto signo = signals.take()) {
      if (*signo != SIGCHLD) {
        signal_job(*signo);
      }
    }
    int wait_status = 0;
    const pid_t reaped = waitpid(child, &wait_status, WNOHANG);
    if (reaped == child) {
      watchdog.disarm();
      outcome.ending = WIFSIGNALED(wait_status) ? RunOutcome::Ending::signaled
                                                : RunOutcome::Ending::exited;
      outcome.status = status_of(wait_status);
      return outcome;
    }

    if (kill_at && util::mono_now() >= *kill_at) {
      signal_job(SIGKILL);
      kill_at.reset();
    }
    if (options.renew && !outcome.lost && util::mono_now() >= next_renew) {
      try {
        std::string renewed;
        const auto verdict = lock.renew(value, options.ttl, renewed);
        if (verdict == lock::Verdict::done) {
          value = renewed;
          lock_expires = util::mono_now() + Micros(options.ttl * 1'000'000);
          next_renew = util::mono_now() + interval;
        } else {
          lose(verdict == lock::Verdict::taken_over ? "another value took its place"
               : verdict == lock::Verdict::absent   ? "the key was deleted"
                                                    : "it expired before it was renewed");
        }
      } catch (const util::Error& e) {
        if (util::mono_now() >= lock_expires) {
          lose(std::string("the backend stayed unreachable until it expired (") + e.what() +
               ")");
        } else {
          warn(std::string("renewal failed, retrying: ") + e.what());
          next_renew = util::mono_now() + std::min(interval, k_retry_interval);
        }
      }
    }
  }
}

}  // namespace nxlock::run
