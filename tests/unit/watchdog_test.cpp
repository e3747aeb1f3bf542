// run/: the watchdog process enforces the lock's deadline by itself, learns later
// deadlines from update(), and stops every process of the job, also one that left its group.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "run/stop_schedule.hpp"
#include "support/test_helpers.hpp"
#include "run/watchdog.hpp"
#include "util/poll.hpp"
#include "util/time.hpp"

namespace nxlock {
namespace {

using util::Micros;

constexpr Micros k_grace{200'000};

run::StopSchedule schedule_with_grace() {
  run::StopSchedule schedule;
  schedule.grace = k_grace;
  return schedule;
}

sigset_t empty_mask() {
  sigset_t mask;
  sigemptyset(&mask);
  return mask;
}

// The go of a job with no environment of its own, enforcing `deadline` by `schedule`.
run::JobWatchdog::Go go_with(const run::StopSchedule& schedule, Micros deadline) {
  run::JobWatchdog::Go go;
  go.schedule = schedule;
  go.deadline = deadline;
  return go;
}

// Whether the job's pidfd says it ended within `wait`.
bool ends_within(const run::JobWatchdog& watchdog, Micros wait) {
  return util::readable_before(watchdog.exit_fd(), util::mono_now() + wait);
}

TEST(JobWatchdog, StopsTheJobByItselfWhenTheDeadlineComesWithNoRenewal) {
  run::JobWatchdog watchdog;
  watchdog.prepare({"sleep", "30"}, empty_mask());
  const run::StopSchedule schedule = schedule_with_grace();
  const Micros started = util::mono_now();
  const Micros deadline = started + Micros(600'000);
  const auto job = watchdog.start(go_with(schedule, deadline));
  ASSERT_GT(job.pid, 0);
  ASSERT_EQ(job.exec_error, 0);

  // Nobody extends or stops: the watchdog's own SIGTERM comes at its moment, and
  // never after the kill, which is before the deadline.
  ASSERT_TRUE(ends_within(watchdog, Micros(5'000'000)));
  const Micros ended = util::mono_now();
  EXPECT_GE(ended, schedule.watchdog_term_at(deadline));
  EXPECT_LT(ended, deadline);
  const int status = watchdog.wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);  // sleep dies of the SIGTERM, before the grace ends
  EXPECT_TRUE(watchdog.stopped_by_itself());
  watchdog.disarm();  // the job ended under our watch, as run-locked ends it
  watchdog.reap();
}

TEST(JobWatchdog, ARenewalsDeadlineKeepsTheJobRunningUntilTheLockIsLost) {
  run::JobWatchdog watchdog;
  watchdog.prepare({"sleep", "30"}, empty_mask());
  const run::StopSchedule schedule = schedule_with_grace();
  const Micros deadline = util::mono_now() + Micros(600'000);
  const auto job = watchdog.start(go_with(schedule, deadline));
  ASSERT_GT(job.pid, 0);
  watchdog.update(deadline + Micros(60'000'000), {});

  // Well past the first deadline, the job still runs.
  EXPECT_FALSE(ends_within(watchdog, Micros(1'000'000)));
  EXPECT_EQ(kill(job.pid, 0), 0);
  // Then the lock is lost, as nxlock finds it: the job's group gets the signal it is told.
  watchdog.stop(SIGTERM, util::mono_now() + Micros(2'000'000));
  ASSERT_TRUE(ends_within(watchdog, Micros(5'000'000)));
  const int status = watchdog.wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(watchdog.stopped_by_itself());
  watchdog.disarm();  // the job ended under our watch, as run-locked ends it
  watchdog.reap();
}

TEST(JobWatchdog, KillAllReachesAProcessThatLeftTheJobsGroupAndSession) {
  const std::string pid_file = ::testing::TempDir() + "nxlock-watchdog-escaped.pid";
  ::unlink(pid_file.c_str());
  run::JobWatchdog watchdog;
  // The job starts a process in a session of its own, which no group kill reaches.
  watchdog.prepare({"sh", "-c", "setsid sleep 30 & echo $! > '" + pid_file + "'; wait"},
                   empty_mask());
  run::StopSchedule schedule;
  schedule.enforced = false;
  const auto job = watchdog.start(go_with(schedule, Micros::max()));
  ASSERT_GT(job.pid, 0);

  pid_t escaped = 0;
  testing::wait_until(
      [&] {
        if (FILE* file = std::fopen(pid_file.c_str(), "r")) {
          if (std::fscanf(file, "%d", &escaped) != 1) {
            escaped = 0;
          }
          std::fclose(file);
        }
        return escaped != 0;
      },
      std::chrono::seconds(5), std::chrono::milliseconds(20));
  ASSERT_GT(escaped, 0);
  ASSERT_EQ(kill(escaped, 0), 0);

  watchdog.kill_all();
  // kill_all returns once none of it is left: the escaped process is gone (reaped
  // by the watchdog, its subreaper), not merely signalled.
  EXPECT_EQ(kill(escaped, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  watchdog.disarm();  // the job ended under our watch, as run-locked ends it
  watchdog.reap();
  ::unlink(pid_file.c_str());
}

}  // namespace
}  // namespace nxlock
