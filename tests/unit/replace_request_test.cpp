// ReplaceRequests (run-locked --replace) on the in-process store, with an injected clock.
#include <gtest/gtest.h>

#include <string>

#include "lock/replace_request.hpp"
#include "store/keys.hpp"
#include "store/memory_store.hpp"
#include "support/test_helpers.hpp"

namespace nxlock {
namespace {

using testing::FakeClock;

constexpr std::int64_t k_replace_t0 = 1'700'000'000;

TEST(ReplaceRequests, TheFirstReplacerWinsAndTheSecondIsToldWho) {
  store::MemoryStore store;
  FakeClock clock(k_replace_t0);
  lock::ReplaceRequests requests(store, clock, "job");
  const auto first = requests.make(30);
  const auto second = requests.make(30);
  EXPECT_NE(first.id, second.id);
  EXPECT_EQ(first.expires, k_replace_t0 + 30);
  EXPECT_FALSE(requests.post(first).has_value());
  const auto other = requests.post(second);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->id, first.id);
  ASSERT_TRUE(requests.pending().has_value());
  EXPECT_EQ(requests.pending()->id, first.id);
  EXPECT_TRUE(store.get(store::replace_key("job")).has_value());
}

TEST(ReplaceRequests, AWithdrawnRequestIsGoneAndOnlyItsOwnerWithdrawsIt) {
  store::MemoryStore store;
  FakeClock clock(k_replace_t0);
  lock::ReplaceRequests requests(store, clock, "job");
  const auto mine = requests.make(30);
  const auto theirs = requests.make(30);
  ASSERT_FALSE(requests.post(mine).has_value());
  requests.withdraw(theirs);  // not the one that stands: left alone
  EXPECT_TRUE(requests.pending().has_value());
  requests.withdraw(mine);
  EXPECT_FALSE(requests.pending().has_value());
  EXPECT_FALSE(store.get(store::replace_key("job")).has_value());
  EXPECT_FALSE(requests.post(theirs).has_value());  // the next may ask now
}

TEST(ReplaceRequests, AnExpiredRequestIsNoRequestAndIsTakenOver) {
  store::MemoryStore store;
  FakeClock clock(k_replace_t0);
  lock::ReplaceRequests requests(store, clock, "job");
  const auto dead = requests.make(5);  // a replacer that died
  ASSERT_FALSE(requests.post(dead).has_value());
  clock.set(k_replace_t0 + 6);
  EXPECT_FALSE(requests.pending().has_value());
  const auto next = requests.make(5);
  EXPECT_FALSE(requests.post(next).has_value());
  ASSERT_TRUE(requests.pending().has_value());
  EXPECT_EQ(requests.pending()->id, next.id);
}

TEST(ReplaceRequests, TheRequestIsACompanionNoLockMayBeNamed) {
  EXPECT_EQ(store::replace_key("backup"), "{backup}:replace:backup");
  EXPECT_TRUE(store::is_companion_key("{backup}:replace:backup"));
}

TEST(ReplaceRequests, ARequestRoundTripsAndNamesItsReplacer) {
  lock::ReplaceRequest r;
  r.id = "00000000000000ff";
  r.pid = 42;
  r.host = "web1";
  r.expires = k_replace_t0;
  const auto back = lock::ReplaceRequest::from_json(r.to_json());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->id, r.id);
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->host, "web1");
  EXPECT_EQ(back->expires, k_replace_t0);
  EXPECT_EQ(r.who(), "pid 42 on web1");
  EXPECT_FALSE(lock::ReplaceRequest::from_json("1700000000").has_value());
}

}  // namespace
}  // namespace nxlock
