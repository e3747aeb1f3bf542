// JobWatchdog: a child subreaper that execs run-locked's job and kills all of it when nxlock dies.
#include "run/watchdog.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/error.hpp"

namespace nxlock::run {

namespace {

// The watchdog's process name: not "nxlock", nor containing it, nor 15 characters
// long (killall then compares the command line, which the watchdog shares with us).
constexpr const char* k_watchdog_name = "nxl-watchdog";

// What the watchdog tells us, one record at a time (atomic on a pipe).
struct Report {
  // stopping: the deadline came with no newer one, and it began stopping the job.
  enum Kind : int { started, exec_failed, spawn_failed, stopping, ended, all_gone };
  Kind kind;
  int value;  // started: the job's pid; *_failed: errno; ended: the job's wait status
};

// What we tell the watchdog, each word with what follows it in one write
// (atomic on a pipe: a stop of ours can never leave half a message);
// end-of-file (we died) means kill_everything, or, before the job started,
// that there is no job. Times are CLOCK_MONOTONIC microseconds, which every
// process of the boot shares; INT64_MAX is "never".
constexpr char k_go = 'g';        // then a GoHeader and its environment settings
constexpr char k_deadline = 'u';  // then an int64: a renewal's new deadline
constexpr char k_stop = 's';      // then a StopOrder: the lock is lost
constexpr char k_done = 'd';
constexpr char k_kill_all = 'k';

struct GoHeader {
  std::uint32_t take_terminal;
  std::uint32_t environment_size;  // bytes of encoded settings that follow
  std::int64_t deadline;           // the lock's, at the start; INT64_MAX: not enforced
  std::int64_t grace;              // StopSchedule::grace
};

struct StopOrder {
  std::int64_t signo;    // for the job's group now: SIGTERM, or SIGKILL for all of it
  std::int64_t kill_at;  // SIGKILL for all of it then, at the latest
};

// The watchdog's view of the lock, from the go and each later word.
struct Guard {
  util::Micros deadline = util::Micros::max();  // max: not enforced
  StopSchedule schedule;
};

// Environment settings on the wire: NAME \0, then '=' VALUE \0 to set it or '-' to remove it.
std::string encode_environment(const std::vector<JobWatchdog::EnvSetting>& settings) {
  std::string bytes;
  for (const auto& setting : settings) {
    bytes.append(setting.name).push_back('\0');
    if (setting.value) {
      bytes.append("=").append(*setting.value).push_back('\0');
    } else {
      bytes.push_back('-');
    }
  }
  return bytes;
}

void apply_environment(const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::string name = bytes.c_str() + at;
    at += name.size() + 1;
    if (at < bytes.size() && bytes[at] == '=') {
      const std::string value = bytes.c_str() + at + 1;
      at += value.size() + 2;
      setenv(name.c_str(), value.c_str(), 1);
    } else {
      ++at;
      unsetenv(name.c_str());
    }
  }
}

bool read_exactly(int fd, void* data, std::size_t size) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = read(fd, at, size);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return false;
    }
    at += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_exactly(int fd, const std::string& bytes) {
  const char* at = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t put = write(fd, at, left);
    if (put < 0 && errno == EINTR) {
      continue;
    }
    if (put <= 0) {
      return false;
    }
    at += put;
    left -= static_cast<std::size_t>(put);
  }
  return true;
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
  std::string environment(header.environment_size, '\0');
  if (!read_exactly(control, environment.data(), environment.size())) {
    return false;
  }
  apply_environment(environment);
  take_terminal = header.take_terminal != 0;
  guard.deadline = util::Micros(header.deadline);
  guard.schedule.enforced = guard.deadline != util::Micros::max();
  guard.schedule.grace = util::Micros(header.grace);
  return true;
}

// A pidfd of `pid`, or -1 (Linux < 5.3, or no such process any more).
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // close-on-exec by definition
#else
  (void)pid;
  return -1;
#endif
}

bool send(int fd, Report::Kind kind, int value) {
  const Report report{kind, value};
  return write(fd, &report, sizeof report) == static_cast<ssize_t>(sizeof report);
}

// The job, between vfork and exec: it borrows the watchdog's memory, so only
// system calls here, no allocation (argv is built before the fork).
[[noreturn]] void exec_job(char* const* argv, const sigset_t& child_mask, bool take_terminal,
                           pid_t parent, volatile int& exec_error) {
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
  execvp(argv[0], argv);
  exec_error = errno;
  _exit(errno == ENOENT ? 127 : 126);
}

// Closes every descriptor but the three kept (sorted here).
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
  Watch(int control, int report, pid_t job, const Guard& guard)
      : m_control(control), m_report(report), m_job(job), m_guard(guard) {}

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
      const util::Micros next = next_step();
      const int timeout_ms =
          next == util::Micros::max() ? -1 : util::poll_timeout_ms(next - util::mono_now());
      pollfd fds[2] = {{m_control, POLLIN, 0}, {children_fd, POLLIN, 0}};
      if (poll(fds, 2, timeout_ms) < 0) {
        continue;
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
    }
  }

 private:
  // One word from nxlock, and what follows it.
  void take_word() {
    char word = 0;
    if (read(m_control, &word, 1) != 1) {
      kill_everything();  // nxlock died: nothing of its job may outlive its lock
      _exit(0);
    }
    if (word == k_kill_all) {
      kill_everything();
      send(m_report, Report::all_gone, 0);
    } else if (word == k_deadline) {
      std::int64_t deadline = 0;
      if (read_exactly(m_control, &deadline, sizeof deadline) && m_guard.schedule.enforced) {
        m_guard.deadline = util::Micros(deadline);
      }
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
      send(m_report, Report::stopping, 0);
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

  void note_reaped(pid_t pid, int status) {
    if (pid == m_job && !m_reported) {
      m_reported = send(m_report, Report::ended, status);
    }
  }

  int m_control;
  int m_report;
  pid_t m_job;
  Guard m_guard;
  bool m_reported = false;
  bool m_stopping = false;                      // SIGTERM sent: the stop goes on to its end
  util::Micros m_kill_at = util::Micros::max();  // SIGKILL for all of the job then
};

// The watchdog, in a fork of ours. Out of our process group and under another
// name: the kills that take nxlock (`timeout -s KILL`, `kill -9 -PGID`,
// `killall -9 nxlock`) must not take it too. A fork, not a clone sharing our
// memory: it runs while we do, and a shared errno would let its system calls
// change what ours seem to have returned.
[[noreturn]] void watch(int control, int report, char* const* argv, const sigset_t& child_mask) {
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
  volatile int exec_error = 0;
  // vfork: the job borrows our memory until exec instead of copying page
  // tables, which is a measurable part of a short job's cost (BENCHMARKS.md).
  const pid_t parent = getpid();
  const pid_t job = vfork();
  if (job == 0) {
    exec_job(argv, child_mask, take_terminal, parent, exec_error);
  }
  if (job < 0) {
    send(report, Report::spawn_failed, errno);
    _exit(0);
  }
  // Hold none of nxlock's descriptors: not a pipe of its caller's past its life,
  // nor a store's lock.
  close_all_but(control, report, children_fd);
  if (exec_error != 0) {
    waitpid(job, nullptr, 0);
    send(report, Report::exec_failed, exec_error);
    char word = 0;
    [[maybe_unused]] auto told = read(control, &word, 1);
    _exit(0);
  }
  send(report, Report::started, job);
  Watch(control, report, job, guard).run(children_fd);
}

bool receive(int fd, Report& report) {
  return read_exactly(fd, &report, sizeof report);
}

}  // namespace

void JobWatchdog::prepare(const std::vector<std::string>& command, const sigset_t& child_mask) {
  m_command = command;
  m_argv.clear();
  for (auto& word : m_command) {
    m_argv.push_back(word.data());
  }
  m_argv.push_back(nullptr);

  int control[2];
  int report[2];
  if (pipe2(control, O_CLOEXEC) != 0) {
    throw util::Error(util::ErrorKind::internal, "pipe", std::strerror(errno));
  }
  m_control.reset(control[1]);
  util::UniqueFd control_read(control[0]);
  if (pipe2(report, O_CLOEXEC) != 0) {
    throw util::Error(util::ErrorKind::internal, "pipe", std::strerror(errno));
  }
  m_report.reset(report[0]);
  util::UniqueFd report_write(report[1]);

  m_pid = fork();
  if (m_pid < 0) {
    throw util::Error(util::ErrorKind::internal, "fork", std::strerror(errno));
  }
  if (m_pid == 0) {
    // Our ends, not the watchdog's: its end-of-file on `control` must come
    // when we close ours (or die), not wait for a copy of its own.
    m_control.reset();
    m_report.reset();
    watch(control_read.get(), report_write.get(), m_argv.data(), child_mask);
  }
  setpgid(m_pid, m_pid);  // as the watchdog does: whichever runs first
}

JobWatchdog::Started JobWatchdog::start(const std::vector<EnvSetting>& environment,
                                        bool take_terminal, const StopSchedule& schedule,
                                        util::Micros deadline) {
  const std::string settings = encode_environment(environment);
  const GoHeader header{take_terminal ? 1U : 0U, static_cast<std::uint32_t>(settings.size()),
                        schedule.enforced ? deadline.count() : util::Micros::max().count(),
                        schedule.grace.count()};
  std::string go(1, k_go);
  go.append(reinterpret_cast<const char*>(&header), sizeof header).append(settings);
  Report first{};
  if (!m_control || !write_exactly(m_control.get(), go) || !receive(m_report.get(), first)) {
    throw util::Error(util::ErrorKind::internal, "run-locked",
                      "the watchdog died before the job started");
  }
  switch (first.kind) {
    case Report::started:
      // Opened after the watchdog started the job, which it may have reaped
      // already: the pid may then name another process, whose end this would
      // tell. Either way the job has ended by the time it is readable, which
      // is all it is used for; the status still comes from the watchdog.
      m_job_exit.reset(open_pidfd(first.value));
      return {first.value, 0};
    case Report::exec_failed:
      return {-1, first.value};
    default:
      throw util::Error(util::ErrorKind::internal, "fork", std::strerror(first.value));
  }
}

std::optional<int> JobWatchdog::take_status() {
  Report report{};
  for (;;) {
    pollfd fd{m_report.get(), POLLIN, 0};
    if (poll(&fd, 1, 0) <= 0) {
      return std::nullopt;
    }
    if (!receive(m_report.get(), report)) {
      // The watchdog was killed: the job got its parent-death SIGKILL.
      m_report.reset();
      m_control.reset();
      return W_EXITCODE(0, SIGKILL);
    }
    if (report.kind == Report::stopping) {
      m_stopped_by_itself = true;
    }
    if (report.kind == Report::ended) {
      return report.value;
    }
  }
}

void JobWatchdog::extend(util::Micros deadline) {
  if (m_control) {
    std::string word(1, k_deadline);
    const std::int64_t count = deadline.count();
    word.append(reinterpret_cast<const char*>(&count), sizeof count);
    write_exactly(m_control.get(), word);
  }
}

void JobWatchdog::stop(int signo, util::Micros kill_at) {
  if (m_control) {
    std::string word(1, k_stop);
    const StopOrder order{signo, kill_at.count()};
    word.append(reinterpret_cast<const char*>(&order), sizeof order);
    write_exactly(m_control.get(), word);
  }
}

int JobWatchdog::wait_status() {
  for (;;) {
    if (!m_report) {
      return W_EXITCODE(0, SIGKILL);  // the watchdog was killed, and the job with it
    }
    if (const auto status = take_status()) {
      return *status;
    }
    pollfd fd{m_report.get(), POLLIN, 0};
    poll(&fd, 1, -1);
  }
}

void JobWatchdog::kill_all() {
  if (!m_control) {
    return;
  }
  [[maybe_unused]] auto written = write(m_control.get(), &k_kill_all, 1);
  Report report{};
  while (receive(m_report.get(), report) && report.kind != Report::all_gone) {
  }
}

void JobWatchdog::disarm() {
  if (m_control) {
    [[maybe_unused]] auto written = write(m_control.get(), &k_done, 1);
    m_control.reset();
  }
}

void JobWatchdog::stop_job() {
  if (m_control) {
    m_control.reset();  // end-of-file without "done": the watchdog kills everything
    reap();
  }
}

void JobWatchdog::reap() {
  if (m_pid > 0) {
    while (waitpid(m_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    m_pid = -1;
  }
}

JobWatchdog::~JobWatchdog() {
  stop_job();
  reap();
}

}  // namespace nxlock::run
