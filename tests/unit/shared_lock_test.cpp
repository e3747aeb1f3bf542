// SharedLock over the memory store: shared holders together, exclusive apart, tokens in order.
#include <gtest/gtest.h>

#include <string>

#include "lock/keys.hpp"
#include "lock/lock.hpp"
#include "lock/shared_lock.hpp"
#include "store/lease_book.hpp"
#include "store/memory_store.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using lock::AcquireResult;
using lock::Lock;
using lock::SharedLock;
using lock::Verdict;
using lock::WaitPolicy;

class FakeClock final : public lock::Clock {
 public:
  util::Micros now() override { return m_now; }
  void set(std::int64_t seconds) { m_now = util::Micros(seconds * 1'000'000); }

 private:
  util::Micros m_now{1'000'000'000LL * 1'000'000};
};

class SharedLockTest : public ::testing::Test {
 protected:
  FakeClock clock;
  store::MemoryStore store{[this] { return clock.now(); }};
  WaitPolicy once{util::Micros(0), -1, {}};
};

TEST_F(SharedLockTest, SharedHoldersHoldTogetherAndKeepExclusiveOut) {
  SharedLock first(store, clock, "k");
  SharedLock second(store, clock, "k");
  const auto a = first.acquire(10, once);
  const auto b = second.acquire(10, once);
  ASSERT_EQ(a.outcome, AcquireResult::Outcome::acquired);
  ASSERT_EQ(b.outcome, AcquireResult::Outcome::acquired);
  EXPECT_TRUE(lock::is_shared_value(a.value));
  EXPECT_GT(b.fence, a.fence);

  // The key holds the latest lease's expiry: an exclusive taker finds it held.
  Lock exclusive(store, clock, "k");
  EXPECT_EQ(exclusive.acquire(10, once).outcome, AcquireResult::Outcome::busy);
  const auto status = exclusive.status();
  EXPECT_EQ(status.state, lock::Status::State::held);
  EXPECT_EQ(status.shared_holders, 2u);

  EXPECT_EQ(first.release(a.value), Verdict::done);
  EXPECT_EQ(exclusive.acquire(10, once).outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(second.release(b.value), Verdict::done);
  EXPECT_FALSE(store.get("k"));  // the last one frees the key
  EXPECT_FALSE(store.get(lock::shared_key("k")));
  const auto taken = exclusive.acquire(10, once);
  ASSERT_EQ(taken.outcome, AcquireResult::Outcome::acquired);
  EXPECT_GT(taken.fence, b.fence);  // one counter orders shared and exclusive holders
}

TEST_F(SharedLockTest, AnExclusiveHolderKeepsSharedOnesOut) {
  Lock exclusive(store, clock, "k");
  const auto held = exclusive.acquire(10, once);
  ASSERT_EQ(held.outcome, AcquireResult::Outcome::acquired);
  SharedLock shared(store, clock, "k");
  const auto busy = shared.acquire(10, once);
  EXPECT_EQ(busy.outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(std::to_string(busy.held_until), held.value);
  // Expired: the shared taker may come in, as a takeover would.
  clock.set(1'000'000'000LL + 12);
  EXPECT_EQ(shared.acquire(10, once).outcome, AcquireResult::Outcome::acquired);
}

TEST_F(SharedLockTest, AnExpiredLeaseIsNoLongerHeldNorRenewed) {
  SharedLock shared(store, clock, "k");
  const auto a = shared.acquire(5, once);
  ASSERT_EQ(a.outcome, AcquireResult::Outcome::acquired);
  std::string renewed;
  EXPECT_EQ(shared.renew(a.value, 7, renewed), Verdict::done);
  EXPECT_NE(renewed, a.value);
  clock.set(1'000'000'000LL + 20);  // the holder died and stopped renewing
  Lock exclusive(store, clock, "k");
  EXPECT_EQ(exclusive.acquire(10, once).outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(shared.renew(renewed, 5, renewed), Verdict::expired);
  EXPECT_EQ(exclusive.status().shared_holders, 0u);
}

TEST_F(SharedLockTest, RenewalMovesTheKeyWithTheLatestLease) {
  SharedLock first(store, clock, "k");
  SharedLock second(store, clock, "k");
  const auto a = first.acquire(5, once);
  const auto b = second.acquire(50, once);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 51));
  EXPECT_EQ(second.release(b.value), Verdict::done);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 6));  // back to the one left
  std::string renewed;
  EXPECT_EQ(first.renew(a.value, 100, renewed), Verdict::done);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 101));
}

TEST_F(SharedLockTest, RefusesValuesThatNameNoLeaseAndDataItMustNotBreak) {
  SharedLock shared(store, clock, "k");
  EXPECT_THROW(shared.release("1234"), util::Error);
  EXPECT_FALSE(lock::is_shared_value("1234"));
  EXPECT_FALSE(lock::is_shared_value("1234:sXYZ"));
  EXPECT_TRUE(lock::is_shared_value("1234:s0123456789abcdef"));
  store.set("k", "not a timestamp");
  try {
    shared.acquire(10, once);
    FAIL() << "data was broken";
  } catch (const util::Error& e) {
    EXPECT_EQ(e.kind(), util::ErrorKind::data);
  }
}

TEST_F(SharedLockTest, TheSharedLeasesKeyIsNoLockName) {
  EXPECT_TRUE(lock::is_companion_key(lock::shared_key("k")));
  EXPECT_THROW(Lock(store, clock, lock::shared_key("k")), util::Error);
}

TEST(LeaseBookTest, ParsesWhatItWritesAndDropsWhatDoesNotParse) {
  store::LeaseBook book(std::string("s1 100\ngarbage\ns2 200\n"));
  EXPECT_EQ(book.size(), 2u);
  EXPECT_EQ(book.latest(), 200);
  book.prune(150);
  EXPECT_EQ(book.encode(), "s2 200\n");
}

TEST(LeaseBookTest, DetailsStayWithTheirLeaseAndGoWithIt) {
  store::LeaseBook book(std::string("s1 100 7 {\"pid\": 1}\ns2 200\n"));
  ASSERT_EQ(book.holders().size(), 2u);
  EXPECT_EQ(book.holders()[0].details, "7 {\"pid\": 1}");
  EXPECT_FALSE(book.holders()[1].details.has_value());
  book.put("s1", 300);  // a renewal keeps them
  EXPECT_TRUE(book.describe("s2", "8 {}\nmore"));
  EXPECT_FALSE(book.describe("s3", "9 {}"));
  EXPECT_EQ(book.encode(), "s1 300 7 {\"pid\": 1}\ns2 200 8 {}\n");
  book.remove("s1");
  EXPECT_EQ(book.encode(), "s2 200 8 {}\n");
}

}  // namespace
}  // namespace nxlock
