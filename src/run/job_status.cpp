// The job's ending and exit status, from its wait status or a failed exec: mapped here alone.
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "run/stages.hpp"

namespace nxlock::run {

RunOutcome with_exit_status(RunOutcome job, int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    job.ending = RunOutcome::Ending::signaled;
    job.status = 128 + WTERMSIG(wait_status);
  } else {
    job.ending = RunOutcome::Ending::exited;
    job.status = WEXITSTATUS(wait_status);
  }
  return job;
}

RunOutcome exec_failure(int error) {
  RunOutcome job;
  job.ending = error == ENOENT ? RunOutcome::Ending::not_found : RunOutcome::Ending::not_executable;
  job.status = error == ENOENT ? 127 : 126;
  job.detail = std::strerror(error);
  return job;
}

RunOutcome collect_exit_status(Supervised supervised, JobWatchdog& watchdog) {
  if (!supervised.status_pending) {
    return std::move(supervised.job);
  }
  const int wait_status = watchdog.wait_status();
  watchdog.disarm();
  return with_exit_status(std::move(supervised.job), wait_status);
}

}  // namespace nxlock::run
