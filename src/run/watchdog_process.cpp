// The watchdog process: a child subreaper that execs run-locked's job, enforces
// the lock's deadline, and kills all of the job when nxlock dies.
#include "run/watchdog_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "run/job_environment.hpp"
#include "run/stop_schedule.hpp"
#include "run/watchdog_wire.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"
#include "util/process.hpp"

namespace nxlock::run {

namespace {

// The watchdog's process name: not "nxlock", nor containing it, nor 15 characters
// long (killall then compares the command line, which the watchdog shares with us).
constexpr const char* k_watchdog_name = "nxl-watchdog";

// The watchdog's view of the lock, from the go and each later word.
struct Guard {
  util::Micros deadline{0};  // the lock's, enforced unless the schedule is not
  StopSchedule schedule;
  // For nxlock's death: the stop's grace, and what the release needs.
  util::Micros death_grace{0};
  TakenHold take;
  std::vector<std::string> values;
};

// Reads `size` bytes; empty on a short read.
std::optional<std::string> read_bytes(int control, std::size_t size) {
  std::string bytes(size, '\0');
  if (!read_exactly(control, bytes.data(), bytes.size())) {
    return std::nullopt;
  }
  return bytes;
}

// Waits for the go and applies its environment; false if nxlock gave up on
// the job (no lock) or died first.
bool await_go(int control, bool& take_terminal, Guard& guard) {
  char word = 0;
  GoHeader header{};
  if (!read_exactly(control, &word, 1) || word != k_go ||
      !read_exactly(control, &header, sizeof header)) {
    return false;
  }
  const auto environment = read_bytes(control, header.environment_size);
  const auto values = read_bytes(control, header.values_size);
  if (!environment || !values) {
    return false;
  }
  apply_environment(*environment);
  take_terminal = header.take_terminal != 0;
  guard.deadline = util::Micros(header.deadline);
  guard.schedule.enforced = header.enforced != 0;
  guard.schedule.grace = util::Micros(header.grace);
  guard.death_grace = util::Micros(header.death_grace);
  guard.take = {header.fence, header.ttl, util::Micros(header.hold_until)};
  guard.values = decode_values(*values);
  return true;
}

// The job, between vfork and exec: it borrows the watchdog's memory, so only
// system calls here, no allocation (argv is built before the fork).
[[noreturn]] void exec_job(char* const* argv, JobEnvironment& environment,
                           const sigset_t& child_mask, bool take_terminal, pid_t parent,
                           volatile int& exec_error) {
  setpgid(0, 0);
  if (take_terminal) {
    // Both sides call tcsetpgrp so the child owns the terminal before it can read it.
    tcsetpgrp(STDIN_FILENO, getpid());
  }
  // If the watchdog dies, even by SIGKILL, the job must not outlive it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) {
    _exit(128 + SIGKILL);  // the watchdog died before the line above took effect
  }
  signal(SIGPIPE, SIG_DFL);  // ignored dispositions survive exec; the child gets the default
  sigprocmask(SIG_SETMASK, &child_mask, nullptr);
  environment.set_pid(getpid());
  execvpe(argv[0], argv, environment.entries());
  exec_error = errno;  // what nxlock reports, and maps to the job's status (job_status.cpp)
  _exit(errno == ENOENT ? 127 : 126);
}

// SIGKILLs every child of the watchdog, from the kernel's list of them.
// False if the list cannot be read (no /proc).
bool kill_children() {
  const int fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  char text[4096];
  const ssize_t got = read(fd, text, sizeof text);
  close(fd);
  pid_t pid = 0;
  for (ssize_t i = 0; i < got; ++i) {
    if (text[i] >= '0' && text[i] <= '9') {
      pid = pid * 10 + (text[i] - '0');
    } else if (pid > 0) {
      kill(pid, SIGKILL);
      pid = 0;
    }
  }
  // A number cut off by a full buffer is left for the next round.
  if (pid > 0 && got < static_cast<ssize_t>(sizeof text)) {
    kill(pid, SIGKILL);
  }
  return true;
}

class Watch {
 public:
  Watch(int control, int report, pid_t job, Guard guard,
        const ReleaseForNxlock& release)
      : m_control(control),
        m_report(report),
        m_job(job),
        m_guard(std::move(guard)),
        m_release(release) {}

  // Reaps what has ended (orphans of the job become our children); reports the job's end.
  void reap_ended() {
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      note_reaped(pid, status);
    }
  }

  // SIGKILLs the job and every descendant: each round kills our children, whose
  // own children are then reparented to us (we are their subreaper), until we
  // have none left. Without /proc, only the job's group is killed.
  void kill_everything() {
    kill(-m_job, SIGKILL);
    for (;;) {
      if (!kill_children()) {
        reap_ended();
        return;
      }
      int status = 0;
      const pid_t pid = waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) {
          continue;
        }
        return;  // ECHILD: nothing of the job is left
      }
      note_reaped(pid, status);
    }
  }

  [[noreturn]] void run(int children_fd) {
    for (;;) {
      // Once nxlock is gone its pipe says end-of-file for ever: not polled.
      pollfd fds[2] = {{m_nxlock_gone ? -1 : m_control, POLLIN, 0}, {children_fd, POLLIN, 0}};
      try {
        util::poll_until(fds, 2, next_step());
      } catch (const util::Error&) {
        continue;  // no one to tell (ENOMEM, say): the watch goes on
      }
      if (fds[1].revents != 0) {
        signalfd_siginfo info[8];
        [[maybe_unused]] auto drained = read(children_fd, info, sizeof info);
      }
      // A job that has ended is not stopped for its lock: reaped first.
      reap_ended();
      // What nxlock said before the deadline's moment counts: a new deadline
      // written in time is read before the schedule is checked.
      if (fds[0].revents != 0) {
        take_word();
      }
      enforce_deadline();
      if (m_nxlock_gone && m_reported) {
        finish_for_nxlock();
      }
    }
  }

 private:
  // One word from nxlock, and what follows it.
  void take_word() {
    char word = 0;
    if (read(m_control, &word, 1) != 1) {
      nxlock_died();
      return;
    }
    if (word == k_kill_all) {
      kill_everything();
      send_report(m_report, Report::all_gone, 0);
    } else if (word == k_update) {
      std::int64_t deadline = 0;
      std::uint32_t size = 0;
      std::optional<std::string> values;
      if (!read_exactly(m_control, &deadline, sizeof deadline) ||
          !read_exactly(m_control, &size, sizeof size) || !(values = read_bytes(m_control, size))) {
        nxlock_died();  // killed in the middle of a word
        return;
      }
      m_guard.deadline = util::Micros(deadline);
      m_guard.values = decode_values(*values);
    } else if (word == k_stop) {
      StopOrder order{};
      if (read_exactly(m_control, &order, sizeof order)) {
        begin_stop(static_cast<int>(order.signo), util::Micros(order.kill_at));
      }
    } else {
      reap_ended();  // leaves what still runs, as a job's own daemon would be left
      _exit(0);
    }
  }

  // When the watchdog must next act by itself; max: nothing scheduled.
  util::Micros next_step() const {
    util::Micros next = m_kill_at;
    if (!m_stopping && !m_reported && m_guard.schedule.enforced) {
      next = std::min(next, m_guard.schedule.watchdog_term_at(m_guard.deadline));
    }
    return next;
  }

  // The deadline came with no newer one while the job runs: nxlock did not
  // act (stopped, hung), so the watchdog stops the job by itself. And a stop
  // under way ends in SIGKILL on time, whoever began it.
  void enforce_deadline() {
    const util::Micros now = util::mono_now();
    if (!m_stopping && !m_reported && m_guard.schedule.enforced &&
        now >= m_guard.schedule.watchdog_term_at(m_guard.deadline)) {
      send_report(m_report, Report::stopping, 0);
      begin_stop(m_guard.schedule.grace > util::Micros(0) ? SIGTERM : SIGKILL,
                 m_guard.schedule.kill_at(m_guard.deadline));
    }
    if (m_kill_at != util::Micros::max() && util::mono_now() >= m_kill_at) {
      m_kill_at = util::Micros::max();
      kill_everything();
    }
  }

  // SIGTERM to the job's group (once), or SIGKILL to all of it; SIGKILL to
  // all of it by `kill_at`, or sooner if the lock's deadline comes first.
  void begin_stop(int signo, util::Micros kill_at) {
    if (m_guard.schedule.enforced) {
      kill_at = std::min(kill_at, m_guard.schedule.kill_at(m_guard.deadline));
    }
    if (signo == SIGKILL) {
      m_stopping = true;
      m_kill_at = util::Micros::max();
      kill_everything();
      return;
    }
    if (!m_stopping) {
      m_stopping = true;
      if (kill(-m_job, signo) != 0 && !m_reported) {
        kill(m_job, signo);  // the job left its group; while unreaped, its pid is its own
      }
    }
    m_kill_at = std::min(m_kill_at, kill_at);
  }

  // nxlock died: nothing of its job may outlive its lock. The job is stopped
  // as on a lost lock (SIGTERM, the grace, SIGKILL; never past the lock's
  // deadline), and once it has ended, finish_for_nxlock() does the rest.
  void nxlock_died() {
    m_nxlock_gone = true;
    if (!m_reported) {
      const util::Micros grace = m_guard.death_grace;
      begin_stop(grace > util::Micros(0) ? SIGTERM : SIGKILL, util::mono_now() + grace);
    }
  }

  // The job has ended and nxlock is gone: whatever the job left running goes
  // too (also what left its group), then the lock, as nxlock would release it.
  [[noreturn]] void finish_for_nxlock() {
    kill_everything();
    release_for_nxlock(m_release, m_guard.values, m_guard.take, m_guard.deadline);
    _exit(0);
  }

  void note_reaped(pid_t pid, int status) {
    if (pid == m_job && !m_reported) {
      m_reported = true;  // reaped; told to nxlock if it still listens
      send_report(m_report, Report::ended, status);
    }
  }

  int m_control;
  int m_report;
  pid_t m_job;
  Guard m_guard;
  const ReleaseForNxlock& m_release;
  bool m_nxlock_gone = false;  // end-of-file without "done"
  bool m_reported = false;  // the job was reaped (and its end told, if nxlock still listens)
  bool m_stopping = false;                       // SIGTERM sent: the stop goes on to its end
  util::Micros m_kill_at = util::Micros::max();  // SIGKILL for all of the job then
};

}  // namespace

// The watchdog, in a fork of ours. Out of our process group and under another
// name: the kills that take nxlock (`timeout -s KILL`, `kill -9 -PGID`,
// `killall -9 nxlock`) must not take it too. A fork, not a clone sharing our
// memory: it runs while we do, and a shared errno would let its system calls
// change what ours seem to have returned.
[[noreturn]] void run_watchdog(int control, int report, char* const* argv,
                               const sigset_t& child_mask,
                               const ReleaseForNxlock& release) {
  setpgid(0, 0);
  prctl(PR_SET_NAME, k_watchdog_name);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t child_signal;
  sigemptyset(&child_signal);
  sigaddset(&child_signal, SIGCHLD);
  const int children_fd = signalfd(-1, &child_signal, SFD_CLOEXEC);

  bool take_terminal = false;
  Guard guard;
  if (!await_go(control, take_terminal, guard)) {
    _exit(0);  // no job to start: nothing of ours to stop either
  }
  JobEnvironment environment;
  volatile int exec_error = 0;
  // vfork: the job borrows our memory until exec instead of copying page
  // tables, which is a measurable part of a short job's cost (BENCHMARKS.md,
// "The watchdog forked before a wait, the job vforked").
  const pid_t parent = getpid();
  const pid_t job = vfork();
  if (job == 0) {
    exec_job(argv, environment, child_mask, take_terminal, parent, exec_error);
  }
  if (job < 0) {
    send_report(report, Report::spawn_failed, errno);
    _exit(0);
  }
  // Hold none of nxlock's descriptors: not a pipe of its caller's past its life,
  // nor a store's lock.
  util::close_all_but(control, report, children_fd);
  if (exec_error != 0) {
    waitpid(job, nullptr, 0);
    send_report(report, Report::exec_failed, exec_error);
    char word = 0;
    [[maybe_unused]] auto told = read(control, &word, 1);
    _exit(0);
  }
  send_report(report, Report::started, job);
  Watch(control, report, job, std::move(guard), release).run(children_fd);
}

}  // namespace nxlock::run
