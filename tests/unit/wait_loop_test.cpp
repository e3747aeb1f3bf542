// wait_for_lock: the one wait loop of Lock and QuorumLock, driven by scripted looks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "lock/wait_loop.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"

namespace nxlock {
namespace {

using lock::AcquireResult;
using lock::Look;
using util::Micros;

constexpr std::int64_t k_held_until = 4'000'000'000;  // far ahead: a poll tick decides

Look busy() {
  Look look;
  look.found = Look::Found::busy;
  look.held_until = k_held_until;
  look.now_seconds = 1'000;
  look.wake_at = k_held_until;
  return look;
}

Look acquired() {
  Look look;
  look.found = Look::Found::acquired;
  look.taken.outcome = AcquireResult::Outcome::acquired;
  look.taken.value = "42";
  return look;
}

// Steps that count their calls; waits sleep their timeout out, as a quiet store does.
struct Script {
  std::function<Look(int)> next = [](int) { return busy(); };
  int looks = 0;
  int arms = 0;
  std::vector<Micros> waits;
  std::vector<bool> waited_on_busy;

  lock::WaitSteps steps() {
    lock::WaitSteps steps;
    steps.look = [this] { return next(looks++); };
    steps.arm = [this] { return arms++ == 0; };
    steps.wait = [this](Micros timeout, int, const Look* look) {
      waits.push_back(timeout);
      waited_on_busy.push_back(look != nullptr);
      std::this_thread::sleep_for(timeout);
      return store::WaitResult::timed_out;
    };
    return steps;
  }
};

TEST(WaitLoop, ZeroWaitLooksOnceAndIsBusy) {
  Script script;
  lock::WaitPolicy policy;
  policy.wait_for = Micros(0);
  lock::LocalClock clock;
  const AcquireResult result = lock::wait_for_lock(policy, clock, script.steps());
  EXPECT_EQ(result.outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(result.held_until, k_held_until);
  EXPECT_EQ(result.held_value, std::to_string(k_held_until));
  EXPECT_EQ(result.now_seconds, 1'000);
  EXPECT_EQ(script.looks, 1);
  EXPECT_EQ(script.arms, 0);
  EXPECT_TRUE(script.waits.empty());
}

TEST(WaitLoop, ArmsThenLooksAgainBeforeTheFirstWait) {
  Script script;
  script.next = [](int n) { return n < 2 ? busy() : acquired(); };
  lock::WaitPolicy policy;
  lock::LocalClock clock;
  const AcquireResult result = lock::wait_for_lock(policy, clock, script.steps());
  EXPECT_EQ(result.outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(result.value, "42");
  EXPECT_EQ(script.looks, 3);
  EXPECT_EQ(script.arms, 2);
  ASSERT_EQ(script.waits.size(), 1u) << "no wait before the look that follows the arming";
  EXPECT_TRUE(script.waited_on_busy[0]);
}

TEST(WaitLoop, StopsAtTheDeadlineAndReportsProgressBeforeEachWait) {
  Script script;
  lock::WaitPolicy policy;
  policy.wait_for = Micros(400'000);
  std::vector<lock::WaitProgress> progress;
  policy.on_wait = [&](const lock::WaitProgress& p) { progress.push_back(p); };
  lock::LocalClock clock;
  const auto started = std::chrono::steady_clock::now();
  const AcquireResult result = lock::wait_for_lock(policy, clock, script.steps());
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(result.held_until, k_held_until);
  EXPECT_GE(took, std::chrono::milliseconds(400));
  EXPECT_LT(took, std::chrono::seconds(5));
  ASSERT_FALSE(script.waits.empty());
  ASSERT_EQ(progress.size(), script.waits.size());
  for (std::size_t i = 0; i < script.waits.size(); ++i) {
    EXPECT_LE(script.waits[i], Micros(400'000)) << "a wait within the deadline";
    EXPECT_EQ(progress[i].held_until, k_held_until);
    EXPECT_EQ(progress[i].now_seconds, 1'000);
    if (i > 0) {
      EXPECT_GE(progress[i].waited, progress[i - 1].waited);
    }
  }
}

TEST(WaitLoop, ReturnsWhenTheWaitIsInterrupted) {
  Script script;
  lock::WaitPolicy policy;
  lock::LocalClock clock;
  lock::WaitSteps steps = script.steps();
  steps.wait = [](Micros, int, const Look*) { return store::WaitResult::interrupted; };
  const AcquireResult result = lock::wait_for_lock(policy, clock, steps);
  EXPECT_EQ(result.outcome, AcquireResult::Outcome::interrupted);
  EXPECT_EQ(result.held_until, k_held_until);
}

TEST(WaitLoop, APauseReadsTheInterruptDescriptorEvenPastTheDeadline) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  util::UniqueFd read_end(fds[0]);
  util::UniqueFd write_end(fds[1]);
  ASSERT_EQ(write(write_end.get(), "x", 1), 1);
  Script script;
  script.next = [](int) {
    Look look = busy();
    look.found = Look::Found::pause;
    look.pause = Micros(10'000'000);
    look.pause_when_late = true;
    return look;
  };
  lock::WaitPolicy policy;
  policy.wait_for = Micros(0);
  policy.interrupt_fd = read_end.get();
  lock::LocalClock clock;
  const AcquireResult result = lock::wait_for_lock(policy, clock, script.steps());
  EXPECT_EQ(result.outcome, AcquireResult::Outcome::interrupted);
  EXPECT_EQ(script.looks, 1);
}

TEST(WaitLoop, AnUnavailableBackendFailsAtOnceBeforeTheWatchIsArmed) {
  Script script;
  script.next = [](int) -> Look {
    throw util::Error(util::ErrorKind::unavailable, "fake", "refused");
  };
  lock::WaitPolicy policy;
  lock::LocalClock clock;
  EXPECT_THROW(lock::wait_for_lock(policy, clock, script.steps()), util::Error);
  EXPECT_EQ(script.looks, 1);
}

TEST(WaitLoop, AnUnavailableBackendIsWaitedOutOnceWaiting) {
  Script script;
  script.next = [](int n) -> Look {
    if (n == 2) {
      throw util::Error(util::ErrorKind::unavailable, "fake", "restarting");
    }
    return n < 3 ? busy() : acquired();
  };
  lock::WaitPolicy policy;
  lock::LocalClock clock;
  const AcquireResult result = lock::wait_for_lock(policy, clock, script.steps());
  EXPECT_EQ(result.outcome, AcquireResult::Outcome::acquired);
  ASSERT_EQ(script.waited_on_busy.size(), 2u);
  EXPECT_TRUE(script.waited_on_busy[0]);
  EXPECT_FALSE(script.waited_on_busy[1]) << "the failure's wait is on no busy look";
}

TEST(WaitLoop, OtherErrorsAreNeverWaitedOut) {
  Script script;
  script.next = [](int n) -> Look {
    if (n == 2) {
      throw util::Error(util::ErrorKind::data, "fake", "not a timestamp");
    }
    return busy();
  };
  lock::WaitPolicy policy;
  lock::LocalClock clock;
  EXPECT_THROW(lock::wait_for_lock(policy, clock, script.steps()), util::Error);
}

}  // namespace
}  // namespace nxlock
