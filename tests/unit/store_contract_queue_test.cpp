// The store contract, waiters' queue: who may try the SETNX, leases, leaving, and whom a release
// wakes. Instantiated only for the backends that keep a queue (QueueContract in store_contract.hpp).
#include <chrono>
#include <string>
#include <thread>

#include "unit/store_contract.hpp"

namespace nxlock::testing {
namespace {

using namespace std::chrono_literals;
using Outcome = store::WaitersQueue::QueuedSet::Outcome;

TEST_P(QueueContract, QueueWithNobodyQueuedTheSetnxIsTriedAsUsual) {
  const auto first = attempt("qa", false);
  EXPECT_EQ(first.outcome, Outcome::set);
  EXPECT_TRUE(first.fence.has_value());
  EXPECT_EQ(m_store->get("k"), "v-qa");
  const auto second = attempt("qb", false);
  EXPECT_EQ(second.outcome, Outcome::held);
  EXPECT_EQ(second.current, "v-qa");
}

TEST_P(QueueContract, QueueOnlyTheFirstLiveWaiterTriesAndWaitersGoInArrivalOrder) {
  m_store->set("k", "held", store::k_plain_step);
  EXPECT_EQ(attempt("qa").outcome, Outcome::held);  // first: it tried, and found the key
  const auto b = attempt("qb");
  EXPECT_EQ(b.outcome, Outcome::behind);
  EXPECT_EQ(b.current, "held");
  // A newcomer that does not wait (-n) does not jump the queue either.
  EXPECT_EQ(attempt("qn", false).outcome, Outcome::behind);

  EXPECT_EQ(m_store->del({"k"}), 1u);
  // Free, but qa is first: qb does not try, even again.
  const auto b_again = attempt("qb");
  EXPECT_EQ(b_again.outcome, Outcome::behind);
  EXPECT_EQ(b_again.current, std::nullopt);
  EXPECT_EQ(m_store->get("k"), std::nullopt);
  // qa takes it, and leaves the queue in the same step: qb is first now.
  const auto a = attempt("qa");
  ASSERT_EQ(a.outcome, Outcome::set);
  EXPECT_TRUE(m_store->queue()->release_and_wake("k", "v-qa", store::Fence("c", *a.fence), "q",
                                                 store::k_plain_step));
  EXPECT_EQ(attempt("qb").outcome, Outcome::set);
}

TEST_P(QueueContract, QueueAWaiterWhoseLeaseLapsedIsPassedOver) {
  m_store->set("k", "held", store::k_plain_step);
  EXPECT_EQ(attempt("qa", true, util::Micros(1'000'000)).outcome, Outcome::held);
  EXPECT_EQ(attempt("qb").outcome, Outcome::behind);
  // qa died: it renews no more. A second lets its lease lapse under any load,
  // and qb looked well inside it.
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(attempt("qb").outcome, Outcome::held);
  m_store->del({"k"});
  EXPECT_EQ(attempt("qb").outcome, Outcome::set);
}

TEST_P(QueueContract, QueueAWaiterThatLeavesLetsTheNextOneGoFirst) {
  m_store->set("k", "held", store::k_plain_step);
  EXPECT_EQ(attempt("qa").outcome, Outcome::held);
  EXPECT_EQ(attempt("qb").outcome, Outcome::behind);
  m_store->queue()->leave("k", "q", "qa");
  m_store->del({"k"});
  EXPECT_EQ(attempt("qb").outcome, Outcome::set);
  // Leaving twice, or a queue that is gone, is nothing.
  m_store->queue()->leave("k", "q", "qa");
}

TEST_P(QueueContract, QueueAReleaseWakesTheFirstWaiterOnly) {
  const auto holder = attempt("qh", false);
  ASSERT_EQ(holder.outcome, Outcome::set);
  EXPECT_EQ(attempt("qa").outcome, Outcome::held);
  EXPECT_EQ(attempt("qb").outcome, Outcome::behind);
  auto first = m_store->queue()->watch_turn("k", "qa");
  first->first(true);
  auto behind = m_store->queue()->watch_turn("k", "qb");
  behind->first(false);
  EXPECT_TRUE(m_store->queue()->release_and_wake("k", "v-qh", store::Fence("c", *holder.fence), "q",
                                                 store::k_plain_step));
  EXPECT_EQ(first->wait(util::Micros(5'000'000), -1), store::WaitResult::changed);
  EXPECT_EQ(behind->wait(util::Micros(300'000), -1), store::WaitResult::timed_out);
  // Its turn handed on when it leaves without taking the lock.
  m_store->queue()->leave("k", "q", "qa");
  EXPECT_EQ(behind->wait(util::Micros(5'000'000), -1), store::WaitResult::changed);
}

}  // namespace
}  // namespace nxlock::testing
