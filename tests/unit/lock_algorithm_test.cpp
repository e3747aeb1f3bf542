// The SETNX page's story (C1…C5) replayed step by step with an injected clock.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/keys.hpp"
#include "lock/lock.hpp"
#include "store/memory_store.hpp"
#include "support/test_helpers.hpp"
#include "unit/scripted_store.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using testing::FakeClock;

using lock::Attempt;
using lock::Lock;
using lock::Verdict;

using scripted::k_key;
using scripted::k_short_ttl;
using scripted::k_t0;
using scripted::ScriptedStore;

TEST(LockAlgorithm, FreeKeyIsTakenBySetnxAlone) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock c4(store, clock, k_key);
  const Attempt a = c4.try_once(k_short_ttl);
  EXPECT_EQ(a.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(a.value, std::to_string(k_t0 + k_short_ttl + 1));  // now + ttl + 1, the page's format
  EXPECT_EQ(store.log, std::vector<std::string>{"SETNX"});
}

TEST(LockAlgorithm, HeldLockIsBusyAndNeverWritten) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 + 5), store::k_plain_step);
  Lock c4(store, clock, k_key);
  const Attempt a = c4.try_once(k_short_ttl);
  EXPECT_EQ(a.outcome, Attempt::Outcome::busy);
  EXPECT_EQ(a.held_until, k_t0 + 5);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET"}));
  EXPECT_EQ(store.inner.get(k_key), std::to_string(k_t0 + 5));
}

// The GET step alone decides: a value equal to now is held, so no GETSET is
// sent. (A GET step that called it expired would still end busy, because the
// GETSET step then sees the same value: only the steps tell the two apart.)
TEST(LockAlgorithm, ValueEqualToNowIsStillHeld) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0), store::k_plain_step);
  Lock c4(store, clock, k_key);
  const Attempt held = c4.try_once(k_short_ttl);
  EXPECT_EQ(held.outcome, Attempt::Outcome::busy);
  EXPECT_EQ(held.held_until, k_t0);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET"}));
  EXPECT_EQ(store.inner.get(k_key), std::to_string(k_t0));

  store.log.clear();
  clock.set(k_t0 + 1);  // now the value is older than now: expired
  const Attempt taken = c4.try_once(k_short_ttl);
  EXPECT_EQ(taken.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET", "GETSET"}));
  EXPECT_EQ(store.inner.get(k_key), taken.value);
}

// C4's GET saw an expired value; before its GETSET another client wrote a value
// that expires exactly now. The old value GETSET returns equals now: still held,
// so C4 does not own the lock and gives the value back.
TEST(LockAlgorithm, GetsetReturningAValueEqualToNowIsNotOwned) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 1), store::k_plain_step);
  const std::string other = std::to_string(k_t0);
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.set(k_key, other, store::k_plain_step); };
  Lock c4(store, clock, k_key);
  const Attempt a = c4.try_once(k_short_ttl);
  EXPECT_EQ(a.outcome, Attempt::Outcome::busy);
  EXPECT_EQ(a.held_until, k_t0);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET", "GETSET", "CAS"}));
  EXPECT_EQ(store.inner.get(k_key), other);

  // One second later the same old value is expired: the GETSET step owns it.
  store.log.clear();
  clock.set(k_t0 + 1);
  store.inner.set(k_key, std::to_string(k_t0 - 1), store::k_plain_step);
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.set(k_key, other, store::k_plain_step); };
  const Attempt b = c4.try_once(k_short_ttl);
  EXPECT_EQ(b.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET", "GETSET"}));
  EXPECT_EQ(store.inner.get(k_key), b.value);
}

// C3 crashed holding the lock. C1 and C2 both find it expired. The broken
// DEL-then-SETNX lets both in; the documented GETSET lets exactly one in,
// whichever way their steps interleave, and nxlock never sends DEL to acquire.
TEST(LockAlgorithm, CrashedHolderIsTakenOverByExactlyOneOfTwo) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 3), store::k_plain_step);  // C3's stale lock
  Lock c1(store, clock, k_key);
  Lock c2(store, clock, k_key);

  Attempt c2_attempt;
  // C1 has done SETNX → 0 and GET → expired; C2 runs all its steps before C1's GETSET.
  store.hook_before = "GETSET";
  store.hook = [&] { c2_attempt = c2.try_once(k_short_ttl); };
  const Attempt c1_attempt = c1.try_once(k_short_ttl);

  EXPECT_EQ(c2_attempt.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(c1_attempt.outcome, Attempt::Outcome::busy);
  for (const auto& op : store.log) {
    EXPECT_NE(op, "DEL") << "acquisition must never DEL";
  }
  // C1's GETSET is logged when it is sent, before C2's steps run inside the hook.
  EXPECT_EQ(store.log,
            (std::vector<std::string>{"SETNX", "GET", "GETSET", "SETNX", "GET", "GETSET"}));
}

// C4 and C5 both GET the expired value; C5's GETSET lands first. C4's GETSET
// then returns C5's fresh timestamp: C4 must not own the lock, and restarts.
TEST(LockAlgorithm, C4AndC5ExactlyOneOwns) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 1), store::k_plain_step);
  Lock c4(store, clock, k_key);
  FakeClock c5_clock(k_t0 + 2);  // C5 a little later: its value differs from C4's
  Lock c5(store, c5_clock, k_key);

  Attempt c5_attempt;
  store.hook_before = "GETSET";
  store.hook = [&] { c5_attempt = c5.try_once(k_short_ttl); };
  const Attempt c4_attempt = c4.try_once(k_short_ttl);

  ASSERT_EQ(c5_attempt.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(c4_attempt.outcome, Attempt::Outcome::busy);
  EXPECT_EQ(c4_attempt.held_until, k_t0 + 2 + k_short_ttl + 1);  // C5's value
  // C4's GETSET overwrote C5's value; C4 put it back by compare-and-set, so the
  // key holds the winner's value again and C4 wrote nothing else.
  EXPECT_EQ(store.inner.get(k_key), c5_attempt.value);
  EXPECT_EQ(store.log,
            (std::vector<std::string>{"SETNX", "GET", "GETSET", "SETNX", "GET", "GETSET", "CAS"}));
  // C4 retrying sees a held lock.
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::busy);
  // The winner still owns its value: it can renew it and release it.
  const lock::Renewed renewed = c5.renew(c5_attempt.value, k_short_ttl);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(c5.release(renewed.value), Verdict::done);
  EXPECT_FALSE(store.inner.get(k_key).has_value());
}

// C4 lost its GETSET to C5, and before C4 could give C5's value back a third
// client changed the key: C4's compare-and-set must not clobber that write.
TEST(LockAlgorithm, LoserGivesTheValueBackOnlyWhileTheKeyHoldsItsOwn) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 1), store::k_plain_step);
  const std::string c5_value = std::to_string(k_t0 + 2 + k_short_ttl + 1);
  store.hook_before = "GETSET";
  store.hook = [&] {
    store.inner.set(k_key, c5_value, store::k_plain_step);  // C5 won the takeover
    store.hook_before = "CAS";
    store.hook = [&] {
      store.inner.set(k_key, "42", store::k_plain_step);
    };  // someone else, before C4's CAS
  };
  Lock c4(store, clock, k_key);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::busy);
  EXPECT_EQ(store.inner.get(k_key), "42");
}

TEST(LockAlgorithm, KeyReleasedBetweenSetnxAndGetMeansRetry) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 + 5), store::k_plain_step);
  store.hook_before = "GET";
  store.hook = [&] { store.inner.del({k_key}); };
  Lock c4(store, clock, k_key);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::retry);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::acquired);
}

TEST(LockAlgorithm, KeyDeletedBeforeGetsetIsOwnedByTheGetset) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 5), store::k_plain_step);
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.del({k_key}); };
  Lock c4(store, clock, k_key);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::acquired);
}

TEST(LockAlgorithm, GarbageIsNeverBroken) {
  for (const std::string garbage : {"hello", "", "-5", "12abc", " 12", "99999999999999999999"}) {
    ScriptedStore store;
    FakeClock clock(k_t0);
    store.inner.set(k_key, garbage, store::k_plain_step);
    Lock c4(store, clock, k_key);
    try {
      c4.try_once(k_short_ttl);
      ADD_FAILURE() << "no error for '" << garbage << "'";
    } catch (const util::Error& e) {
      EXPECT_EQ(e.kind(), util::ErrorKind::data);
    }
    EXPECT_EQ(store.inner.get(k_key), garbage);
  }
}

TEST(LockAlgorithm, GarbageWrittenBetweenGetAndGetsetIsPutBack) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 5), store::k_plain_step);
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.set(k_key, "user data", store::k_plain_step); };
  Lock c4(store, clock, k_key);
  EXPECT_THROW(c4.try_once(k_short_ttl), util::Error);
  EXPECT_EQ(store.inner.get(k_key), "user data");
}

TEST(LockAlgorithm, ReleaseOnlyOwnUnexpiredValue) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  const auto value = lock.try_once(k_short_ttl).value;

  EXPECT_EQ(lock.release(std::to_string(k_t0 + 99)), Verdict::taken_over);
  EXPECT_TRUE(store.inner.get(k_key).has_value());
  EXPECT_EQ(lock.release(value), Verdict::done);
  EXPECT_FALSE(store.inner.get(k_key).has_value());
  EXPECT_EQ(lock.release(value), Verdict::absent);

  // Expired: "check the timeout before DEL" — never deleted, even if still ours.
  const auto again = lock.try_once(k_short_ttl).value;
  clock.set(k_t0 + k_short_ttl + 2);
  EXPECT_EQ(lock.release(again), Verdict::expired);
  EXPECT_EQ(store.inner.get(k_key), again);
  EXPECT_THROW(lock.release("not-a-number"), util::Error);
}

// A releases: its lock goes first (waiters wake sooner), then its details. B
// takes the lock and records its own details in between: they must survive.
TEST(LockAlgorithm, ReleaseLeavesTheNextHoldersDetailsAlone) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock a(store, clock, k_key);
  const auto a_value = a.try_once(k_short_ttl).value;
  a.record_holder(lock::describe_holder(a_value, 1, "a", k_t0));

  FakeClock b_clock(k_t0 + 1);
  Lock b(store, b_clock, k_key);
  std::string b_value;
  store.hook_before = "CAD";  // A's compare-and-delete of the lock...
  store.hook = [&] {
    store.hook_before = "CAD";  // ...then, before the one of its details:
    store.hook = [&] {
      b_value = b.try_once(k_short_ttl).value;
      b.record_holder(lock::describe_holder(b_value, 2, "b", k_t0 + 1));
    };
  };
  EXPECT_EQ(a.release(a_value), Verdict::done);
  ASSERT_FALSE(b_value.empty());
  const auto holder = lock::read_holder(store, k_key, b_value);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, 2);
}

// The server's clock is read once and carried forward: one TIME per process
// (per ten seconds), not one per retry, and the carried value stays on it.
TEST(LockAlgorithm, StoreClockReadsTheStoreOnceAndCarriesItForward) {
  int reads = 0;
  const util::Micros server_time(k_t0 * 1'000'000);
  store::MemoryStore store([&] {
    ++reads;
    return server_time;
  });
  lock::StoreClock clock(store);
  const util::Micros first = clock.now();
  const util::Micros second = clock.now();
  EXPECT_EQ(reads, 1);
  EXPECT_GE(first, server_time);
  EXPECT_LE(second - server_time, util::Micros(1'000'000));  // far from a second away
  EXPECT_GE(second, first);
}

// The server read its clock somewhere within a slow
// exchange (at its end, when the request was held up). The reading is taken to
// belong to the exchange's end, so the estimate never runs ahead of the
// server; lag() says by how much it may run late, and a reading that slow is
// not carried to the next decision.
TEST(LockAlgorithm, StoreClockNeverRunsAheadOfASlowReading) {
  int reads = 0;
  const util::Micros server_time(k_t0 * 1'000'000);
  store::MemoryStore store([&] {
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the request, held up
    return server_time;  // read as the request arrives, at the exchange's end
  });
  lock::StoreClock clock(store);
  const util::Micros first = clock.now();
  EXPECT_EQ(first, server_time);  // not server_time + half the exchange
  EXPECT_GE(clock.lag(), util::Micros(300'000));
  clock.now();
  EXPECT_EQ(reads, 2);  // too slow a reading to carry
}

TEST(LockAlgorithm, RenewMovesExpiryOfOwnValueOnly) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  const auto value = lock.try_once(k_short_ttl).value;
  clock.set(k_t0 + 5);
  const lock::Renewed renewed = lock.renew(value, 30);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(renewed.value, std::to_string(k_t0 + 5 + 30 + 1));
  EXPECT_EQ(store.inner.get(k_key), renewed.value);
  EXPECT_EQ(lock.renew(value, 30).verdict, Verdict::taken_over);  // old value is stale now
}

TEST(LockAlgorithm, AcquireWithoutWaitingReportsTheHolder) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 + 7), store::k_plain_step);
  Lock lock(store, clock, k_key);
  lock::WaitPolicy policy;
  policy.wait_for = util::Micros(0);
  const auto result = lock.acquire(k_short_ttl, policy);
  EXPECT_EQ(result.outcome, lock::AcquireResult::Outcome::busy);
  EXPECT_EQ(result.held_until, k_t0 + 7);
}

TEST(LockAlgorithm, StatusReadsStateAndHolder) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  EXPECT_EQ(lock.status().state, lock::Status::State::free);
  const auto value = lock.try_once(k_short_ttl).value;
  lock::write_holder(store, k_key, lock::describe_holder(value, 42, "backup.sh", k_t0),
                     util::Micros(0));
  auto status = lock.status();
  EXPECT_EQ(status.state, lock::Status::State::held);
  ASSERT_TRUE(status.holder.has_value());
  EXPECT_EQ(status.holder->pid, 42);
  clock.set(k_t0 + k_short_ttl + 2);
  status = lock.status();
  EXPECT_EQ(status.state, lock::Status::State::expired);
}

util::Micros at(std::int64_t seconds, std::int64_t micros = 0) {
  return util::Micros(seconds * 1'000'000 + micros);
}

// --hold's rounding: the value keeps the lock held at every instant before the
// hold's end (by "expired when value < now" on whole seconds) and no more than
// a second past it.
TEST(LockHold, ExpiryHoldingUntilIsHeldToTheEndAndNoSecondLonger) {
  for (const std::int64_t micros : {0, 1, 250'000, 999'999}) {
    const util::Micros until = at(k_t0 + 3, micros);
    const std::int64_t value = lock::expiry_holding_until(until);
    EXPECT_GE(value, util::whole_seconds(until - util::Micros(1))) << micros;  // held just before
    EXPECT_GE(at(value + 1), until) << micros;  // first expired instant
    EXPECT_LT(at(value + 1) - until, util::Micros(1'000'000)) << micros;
  }
  EXPECT_EQ(lock::expiry_holding_until(at(k_t0 + 3)), k_t0 + 2);
  EXPECT_EQ(lock::expiry_holding_until(at(k_t0 + 3, 1)), k_t0 + 3);
}

TEST(LockHold, ReleaseAfterKeepsTheLockUntilTheHoldEnds) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  const auto value = lock.try_once(k_short_ttl).value;
  lock.record_holder(lock::describe_holder(value, 42, "report", k_t0));
  clock.set(at(k_t0, 500'000));  // the job took half a second
  const lock::Kept kept = lock.release_after(value, at(k_t0 + 3, 250'000));
  EXPECT_EQ(kept.verdict, Verdict::done);
  EXPECT_EQ(kept.value, std::to_string(k_t0 + 3));  // shorter than the ttl's expiry
  EXPECT_EQ(store.inner.get(k_key), kept.value);
  const auto holder = lock::read_holder(store, k_key, kept.value);
  ASSERT_TRUE(holder.has_value());  // the details stay while the lock is held
  EXPECT_EQ(holder->pid, 42);
  EXPECT_EQ(holder->finished_at, k_t0);

  FakeClock other_clock(k_t0 + 3);
  Lock other(store, other_clock, k_key);
  other_clock.set(at(k_t0 + 3, 999'999));
  EXPECT_EQ(other.try_once(k_short_ttl).outcome, Attempt::Outcome::busy);
  other_clock.set(at(k_t0 + 4));
  EXPECT_EQ(other.try_once(k_short_ttl).outcome, Attempt::Outcome::acquired);
}

TEST(LockHold, AHoldLongerThanTheTtlWins) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  const auto value = lock.try_once(k_short_ttl).value;
  const lock::Kept kept = lock.release_after(value, at(k_t0 + 3 * k_short_ttl));
  EXPECT_EQ(kept.verdict, Verdict::done);
  EXPECT_EQ(kept.value, std::to_string(k_t0 + 3 * k_short_ttl - 1));
  EXPECT_EQ(store.inner.get(k_key), kept.value);
}

TEST(LockHold, AHoldThatHasPassedReleasesAtOnce) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  const auto value = lock.try_once(k_short_ttl).value;
  lock.record_holder(lock::describe_holder(value, 42, "report", k_t0));
  clock.set(k_t0 + 5);
  const lock::Kept kept = lock.release_after(value, at(k_t0 + 3));
  EXPECT_EQ(kept.verdict, Verdict::done);
  EXPECT_TRUE(kept.value.empty());
  EXPECT_FALSE(store.inner.get(k_key).has_value());
  EXPECT_FALSE(store.inner.get(store::holder_key(k_key)).has_value());
}

// A lost lock is never held: neither an expired value of ours nor another's.
TEST(LockHold, NothingIsHeldForALostLock) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock lock(store, clock, k_key);
  const auto value = lock.try_once(k_short_ttl).value;
  clock.set(k_t0 + k_short_ttl + 2);
  const lock::Kept kept = lock.release_after(value, at(k_t0 + 60));
  EXPECT_EQ(kept.verdict, Verdict::expired);
  EXPECT_TRUE(kept.value.empty());
  EXPECT_EQ(store.inner.get(k_key), value);

  store.inner.set(k_key, std::to_string(k_t0 + 50), store::k_plain_step);
  clock.set(k_t0 + 1);
  EXPECT_EQ(lock.release_after(value, at(k_t0 + 60)).verdict, Verdict::taken_over);
  EXPECT_EQ(store.inner.get(k_key), std::to_string(k_t0 + 50));
}

// The hold's details update is a compare-and-set of the record we wrote: a
// holder that came in between (the hold ran out at once) keeps its own.
TEST(LockHold, ReleaseAfterLeavesTheNextHoldersDetailsAlone) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock a(store, clock, k_key);
  const auto a_value = a.try_once(k_short_ttl).value;
  a.record_holder(lock::describe_holder(a_value, 1, "a", k_t0));

  FakeClock b_clock(k_t0 + 100);
  Lock b(store, b_clock, k_key);
  std::string b_value;
  store.hook_before = "CAS";  // A's compare-and-set of the lock...
  store.hook = [&] {
    store.hook_before = "CAS";  // ...then, before the one of its details:
    store.hook = [&] {
      b_value = b.try_once(k_short_ttl).value;
      b.record_holder(lock::describe_holder(b_value, 2, "b", k_t0 + 100));
    };
  };
  EXPECT_EQ(a.release_after(a_value, at(k_t0 + 3)).verdict, Verdict::done);
  ASSERT_FALSE(b_value.empty());
  const auto holder = lock::read_holder(store, k_key, b_value);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, 2);
  EXPECT_EQ(holder->finished_at, 0);
}

}  // namespace
}  // namespace nxlock
