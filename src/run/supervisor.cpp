// Supervisor: fork/exec, signal forwarding, renewal and the lost-lock policy.
#include "run/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "store/store.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// While the backend fails, renewal retries after a jittered back-off that
// starts short (a restart or a dropped idle connection heals in milliseconds)
// and grows to a cap, until the lock could expire.
constexpr Micros k_backoff_first{50'000};
constexpr Micros k_backoff_cap{500'000};
// The release at the end retries for this long at most; past it, the lock is
// left to expire at its timestamp rather than keep the job's caller waiting.
constexpr Micros k_release_patience{10'000'000};

// A uniformly jittered duration in [base/2, base]: retries of many clients spread out.
Micros jittered(Micros base) {
  static thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<std::int64_t> dist(base.count() / 2, base.count());
  return Micros(dist(rng));
}

std::string seconds_text(Micros duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(duration.count()) / 1e6);
  return text;
}

const char* verdict_reason(lock::Verdict verdict) {
  switch (verdict) {
    case lock::Verdict::taken_over:
      return "another value took its place";
    case lock::Verdict::absent:
      return "the key was deleted";
    case lock::Verdict::expired:
    case lock::Verdict::done:
      break;
  }
  return "it expired before it was renewed";
}

// Applies `attempt` to the held value, then to each value a lost reply may have
// left in the key, until one is ours: a write whose reply never came may still
// have been made, and the key then holds that value, not the one we knew.
lock::Verdict on_any_of_ours(HeldLock& held,
                             const std::function<lock::Verdict(const std::string&)>& attempt) {
  lock::Verdict verdict = attempt(held.value);
  for (auto it = held.maybe_ours.rbegin();
       verdict != lock::Verdict::done && it != held.maybe_ours.rend(); ++it) {
    const std::string candidate = *it;
    if (attempt(candidate) == lock::Verdict::done) {
      verdict = lock::Verdict::done;
    }
  }
  return verdict;
}

// Keeps the lock while the job runs: renews every ttl/3, and rides out a
// backend that fails for a while (a restart, a failover, an idle-client
// timeout) by retrying until the lock could expire. Every attempt's deadline
// is that moment, so no decision rests on a reply that came after it, and a
// lost lock is acted on within one renewal interval, whatever --timeout is.
class Renewal {
 public:
  Renewal(lock::Lock& lock, HeldLock& held, std::int64_t ttl, const Warn& warn)
      : m_lock(lock),
        m_held(held),
        m_ttl(Micros(ttl * 1'000'000)),
        m_interval(std::max(m_ttl / 3, Micros(100'000))),
        m_next(util::mono_now() + m_interval),
        m_warn(warn) {}

  Micros next_at() const { return m_next; }

  // Renews if it is due. Returns why the lock is lost, if it is.
  std::optional<std::string> step() {
    const Micros sent = util::mono_now();
    if (sent < m_next) {
      return std::nullopt;
    }
    std::string written;
    try {
      store::DeadlineScope deadline(m_lock.store(), m_held.valid_until);
      const lock::Verdict verdict = on_any_of_ours(m_held, [&](const std::string& value) {
        return m_lock.renew(value, m_ttl.count() / 1'000'000, written);
      });
      if (verdict != lock::Verdict::done) {
        return std::string(verdict_reason(verdict));
      }
      m_held.value = written;
      m_held.maybe_ours.clear();
      m_held.valid_until = sent + m_ttl;  // the new value was computed after `sent`
      m_next = util::mono_now() + m_interval;
      m_backoff = k_backoff_first;
      if (m_trouble_since) {
        m_warn("lock '" + m_lock.key() + "' renewed again after " +
               seconds_text(util::mono_now() - *m_trouble_since) + " of backend trouble");
        m_trouble_since.reset();
      }
      return std::nullopt;
    } catch (const util::Error& e) {
      if (!written.empty() && written != m_held.value) {
        m_held.maybe_ours.push_back(written);
      }
      const Micros now = util::mono_now();
      if (now >= m_held.valid_until) {
        return std::string("no renewal was confirmed before it could expire (") + e.what() + ")";
      }
      if (!m_trouble_since) {
        m_trouble_since = now;
        m_warn(std::string("renewal failed, retrying while the lock is valid (") +
               seconds_text(m_held.valid_until - now) + " left): " + e.what());
      }
      // The last attempt goes at the expiry itself, with no time left: it fails
      // at once, and the loss is acted on then, not a --timeout later.
      m_next = std::min(now + jittered(m_backoff), m_held.valid_until);
      m_backoff = std::min(m_backoff * 2, k_backoff_cap);
      return std::nullopt;
    }
  }

 private:
  lock::Lock& m_lock;
  HeldLock& m_held;
  Micros m_ttl;
  Micros m_interval;
  Micros m_next;
  Micros m_backoff = k_backoff_first;
  std::optional<Micros> m_trouble_since;  // when the current run of failures began
  const Warn& m_warn;
};

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

RunOutcome supervise(lock::Lock& lock, HeldLock& held, const RunOptions& options,
                     SignalChannel& signals, const Warn& warn) {
  if (util::mono_now() >= held.valid_until) {
    // The backend answered so late that the lock may have expired already.
    throw util::Error(util::ErrorKind::unavailable, "lock '" + lock.key() + "'",
                      "acquired too late to be sure it is still held; the job was not started");
  }
  RunOutcome outcome;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw util::Error(util::ErrorKind::internal, "pipe", std::strerror(errno));
  }
  util::UniqueFd error_read(pipe_fds[0]);
  util::UniqueFd error_write(pipe_fds[1]);

  setenv("NXLOCK_KEY", lock.key().c_str(), 1);
  setenv("NXLOCK_VALUE", held.value.c_str(), 1);

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

  Renewal renewal(lock, held, options.ttl, warn);
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
    if (!outcome.lost) {
      // Not renewed, the lock is lost when it expires: wake up then to say so.
      timeout = std::min(timeout, (options.renew ? renewal.next_at() : held.valid_until) - now);
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
    if (!options.renew && !outcome.lost && util::mono_now() >= held.valid_until) {
      lose("it expired (--no-renew)");
    }
    if (options.renew && !outcome.lost) {
      if (const auto lost = renewal.step()) {
        lose(*lost);
      }
    }
  }
}

lock::Verdict release_held(lock::Lock& lock, HeldLock& held, const ReleaseStep& release_one) {
  // No deadline cap here: the compare-and-delete is decided by the server on
  // the value alone, so a late answer is still a true one. Retries stop when
  // the lock could expire anyway, or after k_release_patience.
  const Micros give_up = std::min(held.valid_until, util::mono_now() + k_release_patience);
  Micros backoff = k_backoff_first;
  bool unanswered = false;  // an earlier attempt's reply was lost: it may have deleted the key
  for (;;) {
    try {
      const lock::Verdict verdict = on_any_of_ours(held, [&](const std::string& value) {
        return release_one ? release_one(value) : lock.release(value);
      });
      return verdict == lock::Verdict::absent && unanswered ? lock::Verdict::done : verdict;
    } catch (const util::Error&) {
      unanswered = true;
      const Micros now = util::mono_now();
      if (now >= give_up) {
        throw;
      }
      const Micros pause = std::min(jittered(backoff), give_up - now);
      backoff = std::min(backoff * 2, k_backoff_cap);
      // A plain sleep: the job is over, and the signals we forward are blocked.
      timespec left{static_cast<time_t>(pause.count() / 1'000'000),
                    static_cast<long>(pause.count() % 1'000'000 * 1000)};
      while (nanosleep(&left, &left) != 0 && errno == EINTR) {
      }
    }
  }
}

}  // namespace nxlock::run
