// JobWatchdog: nxlock's end of the watchdog: its fork, and the control and report pipes.
#include "run/watchdog.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "run/watchdog_process.hpp"
#include "run/watchdog_wire.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"

namespace nxlock::run {

namespace {

// A pidfd of `pid`, or -1 (Linux < 5.3, or no such process any more).
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // close-on-exec by definition
#else
  (void)pid;
  return -1;
#endif
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
    run_watchdog(control_read.get(), report_write.get(), m_argv.data(), child_mask, m_release);
  }
  setpgid(m_pid, m_pid);  // as the watchdog does: whichever runs first
}

JobWatchdog::Started JobWatchdog::start(const Go& go, const std::function<void()>& meanwhile) {
  const std::string settings = encode_environment(go.environment);
  const std::string values = encode_values(go.values);
  const GoHeader header{go.take_terminal ? 1U : 0U,
                        static_cast<std::uint32_t>(settings.size()),
                        go.deadline.count(),
                        go.schedule.grace.count(),
                        go.death_grace.count(),
                        go.take.fence,
                        go.take.ttl,
                        go.take.hold_until.count(),
                        static_cast<std::uint32_t>(values.size()),
                        go.schedule.enforced ? 1U : 0U};
  std::string word(1, k_go);
  word.append(reinterpret_cast<const char*>(&header), sizeof header).append(settings).append(values);
  Report first{};
  const bool sent = m_control && write_exactly(m_control.get(), word);
  if (sent && meanwhile) {
    meanwhile();
  }
  if (!sent || !receive_report(m_report.get(), first)) {
    throw util::Error(util::ErrorKind::internal, "run-locked",
                      "the watchdog died before the job started");
  }
  switch (first.kind) {
    case Report::started:
      m_started = true;
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
    if (!util::readable_before(m_report.get(), util::mono_now())) {
      return std::nullopt;  // nothing said yet
    }
    if (!receive_report(m_report.get(), report)) {
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

void JobWatchdog::update(util::Micros deadline, const std::vector<std::string>& values) {
  if (m_control) {
    const std::string bytes = encode_values(values);
    const std::int64_t count = deadline.count();
    const auto size = static_cast<std::uint32_t>(bytes.size());
    std::string word(1, k_update);
    word.append(reinterpret_cast<const char*>(&count), sizeof count)
        .append(reinterpret_cast<const char*>(&size), sizeof size)
        .append(bytes);
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
    util::readable_before(m_report.get(), util::Micros::max());
  }
}

void JobWatchdog::kill_all() {
  if (!m_control) {
    return;
  }
  [[maybe_unused]] auto written = write(m_control.get(), &k_kill_all, 1);
  Report report{};
  while (receive_report(m_report.get(), report) && report.kind != Report::all_gone) {
  }
}

void JobWatchdog::disarm() {
  if (m_control) {
    [[maybe_unused]] auto written = write(m_control.get(), &k_done, 1);
    m_control.reset();
  }
}

void JobWatchdog::stop_job() {
  if (m_control && m_started) {
    kill_all();  // not end-of-file: the watchdog would release the lock, which is ours to
    disarm();
  }
  m_control.reset();  // before the go: there is no job
  reap();
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
