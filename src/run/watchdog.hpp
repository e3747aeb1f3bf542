// JobWatchdog: the process that starts run-locked's job and stops all of it if nxlock dies.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>

#include "util/fd.hpp"

namespace nxlock::run {

// No part of the job may outlive the lock, even when nxlock is SIGKILLed
// together with its process group. PR_SET_PDEATHSIG reaches only a direct
// child, and a group kill misses whatever left the job's process group
// (setsid, setpgid). So the job is the child of a watchdog process that is a
// child subreaper (PR_SET_CHILD_SUBREAPER): everything the job starts stays its
// descendant, whatever group or session it moves to, and orphans are reparented
// to it. The watchdog waits on a pipe only nxlock writes: end-of-file without a
// "done" byte means nxlock died, and it kills every descendant it has.
class JobWatchdog {
 public:
  JobWatchdog() = default;
  JobWatchdog(const JobWatchdog&) = delete;
  JobWatchdog& operator=(const JobWatchdog&) = delete;
  // Stops the job if it was not disarmed, then reaps the watchdog.
  ~JobWatchdog();

  struct Started {
    pid_t pid = -1;      // the job, leader of its own process group
    int exec_error = 0;  // errno of a failed exec (the job then exited at once), else 0
  };
  // Starts the watchdog, which execs `argv` as its child in a process group of
  // its own, with `child_mask` as its signal mask, taking the terminal's
  // foreground if `take_terminal`. `argv` must stay valid until the job ends.
  // Throws util::Error (internal) if neither process could be started.
  Started start(char* const* argv, const sigset_t& child_mask, bool take_terminal);

  // Readable when the job has ended: take_status() then returns its wait status.
  int status_fd() const { return m_report.get(); }
  std::optional<int> take_status();

  // SIGKILLs the job and everything it started, also what left its process
  // group or session, and returns once none of it is left.
  void kill_all();

  // The job ended under our watch: the watchdog exits without killing what the
  // job left running, as before it existed (a daemon it started, say). Not
  // waited for here: it exits on its own at once.
  void disarm();

  // We are failing with the job still running: the watchdog stops all of it,
  // as if we had died, and this returns once it has.
  void stop_job();

  // Waits until the watchdog has exited (an orphaned zombie is never reaped
  // where PID 1 does not reap, as in many containers).
  void reap();

 private:
  pid_t m_pid = -1;          // the watchdog, until reaped
  util::UniqueFd m_control;  // ours → watchdog: "done", "kill all", or end-of-file
  util::UniqueFd m_report;   // watchdog → ours: the job's start, then its wait status
};

}  // namespace nxlock::run
