// run/: the stop schedule's instants, and Renewal's deadline: counted from when a
// confirmed renewal was sent, bounding every attempt, and lost when it passes.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "lock/lock.hpp"
#include "run/renewal.hpp"
#include "run/stop_schedule.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using util::Micros;

TEST(StopSchedule, KillsBeforeTheDeadlineAndTermsAGraceBeforeThat) {
  const Micros deadline(100'000'000);
  const run::StopSchedule schedule = run::stop_schedule(true, false, Micros(10'000'000), 60);
  // A fifteenth of a 60 s ttl: 4 s of grace, under --kill-after's 10 s.
  EXPECT_EQ(schedule.grace, Micros(4'000'000));
  EXPECT_EQ(schedule.kill_at(deadline), deadline - run::k_kill_margin);
  EXPECT_EQ(schedule.term_at(deadline), schedule.kill_at(deadline) - schedule.grace);
  EXPECT_LT(schedule.term_at(deadline), schedule.watchdog_term_at(deadline));
  EXPECT_LE(schedule.watchdog_term_at(deadline), schedule.kill_at(deadline));
  EXPECT_EQ(schedule.lead(), run::k_kill_margin + schedule.grace);
}

TEST(StopSchedule, GraceHasAFloorACapAndNoneForKillAtOnce) {
  // A short ttl still gives a shell's trap its floor; --kill-after caps it.
  EXPECT_EQ(run::stop_schedule(true, false, Micros(10'000'000), 2).grace, run::k_grace_floor);
  EXPECT_EQ(run::stop_schedule(true, false, Micros(1'000), 600).grace, Micros(1'000));
  EXPECT_EQ(run::stop_schedule(true, true, Micros(10'000'000), 60).grace, Micros(0));
  // The watchdog never acts past the kill, however little grace there is.
  const run::StopSchedule at_once = run::stop_schedule(true, true, Micros(0), 60);
  EXPECT_EQ(at_once.watchdog_term_at(Micros(1'000'000)), at_once.kill_at(Micros(1'000'000)));
  // --on-lost ignore: nxlock never acts before the deadline.
  EXPECT_EQ(run::stop_schedule(false, false, Micros(10'000'000), 60).lead(), Micros(0));
}

// A lock whose renewals answer as scripted, recording the deadline each ran under.
class ScriptedLock final : public lock::Lockable {
 public:
  enum class Answer { done, lost, unavailable };
  std::deque<Answer> answers;
  std::vector<std::optional<Micros>> deadlines;  // set_deadline's, in order
  int renewals = 0;
  Micros reply_delay{0};   // how long each answer takes
  Micros last_called{0};   // when the last renewal was asked for (monotonic)

  const std::string& key() const override { return m_key; }
  std::int64_t fence() const override { return 1; }
  lock::AcquireResult acquire(std::int64_t, const lock::WaitPolicy&) override { return {}; }
  lock::Verdict release(std::string_view) override { return lock::Verdict::done; }
  lock::Kept release_after(std::string_view, Micros) override { return {lock::Verdict::done, {}}; }
  void resume(std::string_view, std::int64_t, std::int64_t) override {}
  // Each renewal writes "v" and its number.
  lock::RenewalPlan plan_renewal(std::string_view, std::int64_t ttl) override {
    return {ttl, Micros(0), "v" + std::to_string(renewals + 1)};
  }
  lock::Renewed renew(std::string_view, const lock::RenewalPlan& plan) override {
    ++renewals;
    last_called = util::mono_now();
    std::this_thread::sleep_for(reply_delay);
    const Answer answer = answers.empty() ? Answer::done : answers.front();
    if (!answers.empty()) {
      answers.pop_front();
    }
    if (answer == Answer::unavailable) {
      throw util::Error(util::ErrorKind::unavailable, "redis://x", "connection refused");
    }
    if (answer != Answer::done) {
      return {lock::Verdict::taken_over, {}};
    }
    return {lock::Verdict::done, plan.value};
  }
  void record_holder(lock::Holder) override {}
  std::optional<lock::Holder> holder_of(std::string_view) override { return std::nullopt; }
  lock::Removal force_release() override { return {}; }
  lock::Status status() override { return {}; }
  void set_deadline(std::optional<Micros> deadline) override { deadlines.push_back(deadline); }

 private:
  std::string m_key = "k";
};

// Steps until step() acted (a renewal was tried) or `within` passed.
std::optional<run::Loss> step_once(run::Renewal& renewal, ScriptedLock& lock, Micros within) {
  const int before = lock.renewals;
  const Micros until = util::mono_now() + within;
  while (util::mono_now() < until) {
    if (auto loss = renewal.step()) {
      return loss;
    }
    if (lock.renewals != before) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "no renewal was tried";
  return std::nullopt;
}

class RenewalTest : public ::testing::Test {
 protected:
  ScriptedLock lock;
  run::HeldLock held;
  run::Reporter reporter{[this](std::string_view) { ++warnings; }, {}, {}, {}, {}};
  int warnings = 0;
};

TEST_F(RenewalTest, AConfirmedRenewalCountsFromWhenItWasSent) {
  const Micros lead(200'000);
  held.value = "v0";
  held.valid_until = util::mono_now() + Micros(1'000'000);
  run::Renewal renewal(lock, held, 1, lead, reporter);
  const Micros old_valid = held.valid_until;
  lock.reply_delay = Micros(150'000);  // a slow answer must not lengthen the lock
  EXPECT_FALSE(step_once(renewal, lock, Micros(2'000'000)).has_value());
  ASSERT_EQ(lock.renewals, 1);
  // Under the old deadline, less the lead: no decision on a later reply.
  ASSERT_FALSE(lock.deadlines.empty());
  EXPECT_EQ(lock.deadlines.front(), old_valid - lead);
  EXPECT_FALSE(lock.deadlines.back().has_value());  // cleared after the step
  // The ttl from the moment the request went, not from its answer.
  EXPECT_LE(held.valid_until, lock.last_called + Micros(1'000'000));
  EXPECT_GE(held.valid_until, lock.last_called + Micros(1'000'000) - Micros(50'000));
  EXPECT_EQ(held.value, "v1");
  EXPECT_EQ(held.maybe_ours, std::vector<std::string>{"v0"});
}

// A renewal whose reply was lost may have been stored even so: the value it
// planned to write is tried too, from the next renewal on.
TEST_F(RenewalTest, TheValueOfARenewalThatGotNoReplyMayBeOurs) {
  held.value = "v0";
  held.valid_until = util::mono_now() + Micros(1'000'000);
  run::Renewal renewal(lock, held, 1, Micros(0), reporter);
  lock.answers = {ScriptedLock::Answer::unavailable};
  EXPECT_FALSE(step_once(renewal, lock, Micros(2'000'000)).has_value());
  EXPECT_EQ(held.value, "v0");
  EXPECT_EQ(held.maybe_ours, std::vector<std::string>{"v1"});
}

TEST_F(RenewalTest, ARefusedRenewalIsALossWithItsVerdict) {
  held.value = "v0";
  held.valid_until = util::mono_now() + Micros(1'000'000);
  run::Renewal renewal(lock, held, 1, Micros(0), reporter);
  lock.answers = {ScriptedLock::Answer::lost};
  const auto loss = step_once(renewal, lock, Micros(2'000'000));
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->verdict, lock::Verdict::taken_over);
}

TEST_F(RenewalTest, AFailingBackendIsRiddenOutUntilTheLeadThenLost) {
  const Micros lead(300'000);
  held.value = "v0";
  held.valid_until = util::mono_now() + Micros(1'200'000);
  run::Renewal renewal(lock, held, 1, lead, reporter);
  lock.answers.assign(100, ScriptedLock::Answer::unavailable);
  const Micros act_by = held.valid_until - lead;
  std::optional<run::Loss> loss;
  const Micros give_up = util::mono_now() + Micros(5'000'000);
  while (!loss && util::mono_now() < give_up) {
    loss = renewal.step();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(loss.has_value());
  EXPECT_FALSE(loss->verdict.has_value());  // no answer: the lock could expire
  EXPECT_GE(util::mono_now(), act_by);
  EXPECT_LT(util::mono_now(), act_by + Micros(500'000));  // acted on at once, not a timeout later
  EXPECT_GE(lock.renewals, 2);  // retried, not given up at the first failure
  EXPECT_EQ(warnings, 1);       // the trouble is told once
  for (const auto& deadline : lock.deadlines) {
    EXPECT_TRUE(!deadline || *deadline == act_by);
  }
}

}  // namespace
}  // namespace nxlock
