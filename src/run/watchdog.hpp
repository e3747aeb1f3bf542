// JobWatchdog: the process that starts run-locked's job and stops all of it if nxlock dies.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "run/job_environment.hpp"
#include "run/stop_schedule.hpp"
#include "run/watchdog_release.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// No part of the job may outlive the lock, even when nxlock is SIGKILLed
// together with its process group. PR_SET_PDEATHSIG reaches only a direct
// child, and a group kill misses whatever left the job's process group
// (setsid, setpgid). So the job is the child of a watchdog process that is a
// child subreaper (PR_SET_CHILD_SUBREAPER): everything the job starts stays its
// descendant, whatever group or session it moves to, and orphans are reparented
// to it. The watchdog waits on a pipe only nxlock writes: end-of-file without a
// "done" byte means nxlock died, and it kills every descendant it has.
//
// Nor may a job outlive its lock when nxlock is stopped or hung (SIGSTOP, a
// debugger, a stuck system call): the watchdog knows the lock's deadline (a
// CLOCK_MONOTONIC time, which every process of the boot shares), learns each
// new one as a renewal is confirmed, and when the schedule's moment comes with
// no newer one, stops the job by itself: SIGTERM to its group, SIGKILL to all
// of it by the deadline less the kill margin (stop_schedule.hpp).
//
// And when nxlock dies, the watchdog finishes its work: it stops the job as on
// a lost lock (SIGTERM, --kill-after, SIGKILL), reaps every descendant, then
// releases the lock itself, by the compare-and-delete of the held value and
// token that nxlock's own release uses, so the next run need not wait for the
// ttl. It learns the values the lock may hold (a renewal's, before it writes)
// as nxlock does. Once nxlock has begun its own release (disarm), it never does.
class JobWatchdog {
 public:
  JobWatchdog() = default;  // nxlock's death leaves the lock to its ttl
  explicit JobWatchdog(ReleaseForNxlock release) : m_release(std::move(release)) {}
  JobWatchdog(const JobWatchdog&) = delete;
  JobWatchdog& operator=(const JobWatchdog&) = delete;
  // Stops the job if it was not disarmed, then reaps the watchdog.
  ~JobWatchdog();

  // Forks the watchdog, which then waits to be told to start `command` as its
  // child with `child_mask` as its signal mask. Done before a lock is waited
  // for, it takes a process start off the path from the lock to the job; the
  // watchdog then holds none of the store's descriptors, opened after it.
  // Throws util::Error (internal) if it cannot be started.
  void prepare(const std::vector<std::string>& command, const sigset_t& child_mask);
  bool prepared() const { return m_pid > 0; }
  // The watchdog's pid, once prepared; else -1.
  pid_t pid() const { return m_pid; }

  struct Started {
    pid_t pid = -1;      // the job, leader of its own process group
    int exec_error = 0;  // errno of a failed exec (the job then exited at once), else 0
  };
  struct Go {
    std::vector<EnvSetting> environment;  // the job's, beside NXLOCK_JOB_PID
    bool take_terminal = false;
    StopSchedule schedule;
    util::Micros deadline{0};  // monotonic: the lock's, at the start
    // nxlock died: SIGTERM, then SIGKILL this long after (zero: at once), and
    // never past the schedule's kill; then the release, with `take` and `values`.
    util::Micros death_grace{0};
    TakenHold take;
    std::vector<std::string> values;  // the hold's, as `unlock` takes them
  };
  // Tells the prepared watchdog to start the job: it applies the environment to
  // its own (the job inherits it; ours stays as it was), sets NXLOCK_JOB_PID to
  // the job's own pid, then execs the job in a process group of its own, taking
  // the terminal's foreground if asked. From then on it enforces the deadline
  // (monotonic) by the schedule, unless it is not enforced (--on-lost ignore).
  // `meanwhile`, if given, runs after the go is sent and before the job's start
  // is awaited: work of ours the job need not wait for overlaps its start
  // instead of following it (BENCHMARKS.md, "Where the time goes"). It must
  // not throw.
  // Throws util::Error (internal) if the job could not be started.
  Started start(const Go& go, const std::function<void()>& meanwhile = {});

  // A renewal was confirmed, or is about to write: the lock lasts until
  // `deadline` (monotonic), and holds one of `values` (as `unlock` takes them,
  // the likeliest first). Until the watchdog has read this, what it knew holds.
  void update(util::Micros deadline, const std::vector<std::string>& values);

  // The lock is lost: the job's group gets `signo` (SIGTERM, or SIGKILL for
  // all of it) now, and all of it SIGKILL at `kill_at` (monotonic) at the
  // latest. Once stopping, the watchdog goes on to the end.
  void stop(int signo, util::Micros kill_at);

  // The watchdog found the deadline come with no newer one and began stopping
  // the job by itself (seen once a report was taken: take_status()).
  bool stopped_by_itself() const { return m_stopped_by_itself; }

  // Readable as soon as the job's process has ended, before the watchdog has
  // reaped it and reported its status: the lock can go then. -1 where the
  // kernel has no pidfd (Linux < 5.3); status_fd() tells then.
  int exit_fd() const { return m_job_exit.get(); }

  // Readable when the watchdog reports: take_status() then takes what it
  // said, and returns the job's wait status if it has ended.
  int status_fd() const { return m_report.get(); }
  std::optional<int> take_status();
  // Waits for the job's wait status (after exit_fd() said it ended).
  int wait_status();

  // SIGKILLs the job and everything it started, also what left its process
  // group or session, and returns once none of it is left.
  void kill_all();

  // The job ended under our watch: the watchdog exits without killing what the
  // job left running, as before it existed (a daemon it started, say). Not
  // waited for here: it exits on its own at once.
  void disarm();

  // We are failing with the job still running: the watchdog kills all of it,
  // and this returns once it has; the release stays ours.
  void stop_job();

  // Waits until the watchdog has exited (an orphaned zombie is never reaped
  // where PID 1 does not reap, as in many containers).
  void reap();

 private:
  ReleaseForNxlock m_release;
  pid_t m_pid = -1;          // the watchdog, until reaped
  bool m_started = false;    // it started the job
  std::vector<std::string> m_command;
  std::vector<char*> m_argv;  // into m_command, built before the fork
  util::UniqueFd m_job_exit;  // a pidfd of the job
  // ours → watchdog: the go, new deadlines, "stop", "done", "kill all", or end-of-file
  util::UniqueFd m_control;
  // watchdog → ours: the job's start, "stopping by itself", then its wait status
  util::UniqueFd m_report;
  bool m_stopped_by_itself = false;
};

}  // namespace nxlock::run
