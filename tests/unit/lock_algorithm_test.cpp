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
#include "util/error.hpp"

namespace nxlock {
namespace {

using testing::FakeClock;

using lock::Attempt;
using lock::Lock;
using lock::Verdict;

// A store that logs every operation and can run a hook just before one of them,
// so a test can slip another client's steps in between ours.
class ScriptedStore final : public store::Store {
 public:
  store::MemoryStore inner;
  std::vector<std::string> log;
  std::string hook_before;  // operation name
  std::function<void()> hook;

  std::string describe() const override { return "scripted"; }
  store::SetIfAbsent set_if_absent(std::string_view k, std::string_view v,
                                   std::optional<std::string_view> c = {},
                                   store::StepPolicy p = {}) override {
    step("SETNX");
    return inner.set_if_absent(k, v, c, p);
  }
  std::optional<std::string> get(std::string_view k) override {
    step("GET");
    return inner.get(k);
  }
  store::Swap get_and_set(std::string_view k, std::string_view v,
                          std::optional<store::Takeover> t = {},
                          store::StepPolicy p = {}) override {
    step("GETSET");
    return inner.get_and_set(k, v, t, p);
  }
  void set(std::string_view k, std::string_view v, store::StepPolicy p = {}) override {
    step("SET");
    inner.set(k, v, p);
  }
  std::size_t del(const std::vector<std::string>& keys) override {
    step("DEL");
    return inner.del(keys);
  }
  // The fenced steps log as the page's steps they are.
  bool compare_and_delete(std::string_view k, std::string_view e,
                          std::optional<store::Fence> f = {}, store::StepPolicy p = {}) override {
    step("CAD");
    return inner.compare_and_delete(k, e, f, p);
  }
  bool compare_and_set(std::string_view k, std::string_view e, std::string_view v,
                       std::optional<store::Fence> f = {}, store::StepPolicy p = {}) override {
    step("CAS");
    return inner.compare_and_set(k, e, v, f, p);
  }
  util::Micros now() override { return inner.now(); }
  std::unique_ptr<store::Watcher> watch(std::string_view k) override { return inner.watch(k); }

 private:
  void step(const std::string& name) {
    log.push_back(name);
    if (hook && name == hook_before) {
      auto once = std::move(hook);
      hook = nullptr;
      once();
    }
  }
};

constexpr std::int64_t k_t0 = 1'732'000'000;
constexpr std::int64_t k_short_ttl = 10;
const std::string k_key = "lock.foo";

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
  store.inner.set(k_key, std::to_string(k_t0 + 5));
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
  store.inner.set(k_key, std::to_string(k_t0));
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
  store.inner.set(k_key, std::to_string(k_t0 - 1));
  const std::string other = std::to_string(k_t0);
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.set(k_key, other); };
  Lock c4(store, clock, k_key);
  const Attempt a = c4.try_once(k_short_ttl);
  EXPECT_EQ(a.outcome, Attempt::Outcome::busy);
  EXPECT_EQ(a.held_until, k_t0);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET", "GETSET", "CAS"}));
  EXPECT_EQ(store.inner.get(k_key), other);

  // One second later the same old value is expired: the GETSET step owns it.
  store.log.clear();
  clock.set(k_t0 + 1);
  store.inner.set(k_key, std::to_string(k_t0 - 1));
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.set(k_key, other); };
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
  store.inner.set(k_key, std::to_string(k_t0 - 3));  // C3's stale lock
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
  store.inner.set(k_key, std::to_string(k_t0 - 1));
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
  store.inner.set(k_key, std::to_string(k_t0 - 1));
  const std::string c5_value = std::to_string(k_t0 + 2 + k_short_ttl + 1);
  store.hook_before = "GETSET";
  store.hook = [&] {
    store.inner.set(k_key, c5_value);  // C5 won the takeover
    store.hook_before = "CAS";
    store.hook = [&] { store.inner.set(k_key, "42"); };  // someone else, before C4's CAS
  };
  Lock c4(store, clock, k_key);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::busy);
  EXPECT_EQ(store.inner.get(k_key), "42");
}

TEST(LockAlgorithm, KeyReleasedBetweenSetnxAndGetMeansRetry) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 + 5));
  store.hook_before = "GET";
  store.hook = [&] { store.inner.del({k_key}); };
  Lock c4(store, clock, k_key);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::retry);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::acquired);
}

TEST(LockAlgorithm, KeyDeletedBeforeGetsetIsOwnedByTheGetset) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 5));
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.del({k_key}); };
  Lock c4(store, clock, k_key);
  EXPECT_EQ(c4.try_once(k_short_ttl).outcome, Attempt::Outcome::acquired);
}

TEST(LockAlgorithm, GarbageIsNeverBroken) {
  for (const std::string garbage : {"hello", "", "-5", "12abc", " 12", "99999999999999999999"}) {
    ScriptedStore store;
    FakeClock clock(k_t0);
    store.inner.set(k_key, garbage);
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
  store.inner.set(k_key, std::to_string(k_t0 - 5));
  store.hook_before = "GETSET";
  store.hook = [&] { store.inner.set(k_key, "user data"); };
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
  store.inner.set(k_key, std::to_string(k_t0 + 7));
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

  store.inner.set(k_key, std::to_string(k_t0 + 50));
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

// ---- fencing tokens ----------------------------------------------------------

const std::string k_fence_key = store::fence_key(k_key);

// Every acquisition, a takeover of an expired lock included, gets a token above
// every earlier one; the counter beside the lock says the latest.
TEST(LockFencing, EveryAcquisitionGetsAHigherToken) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  std::int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    Lock lock(store, clock, k_key);
    const Attempt a = lock.try_once(k_short_ttl);
    ASSERT_EQ(a.outcome, Attempt::Outcome::acquired);
    EXPECT_GT(a.fence, last);
    EXPECT_EQ(lock.fence(), a.fence);
    EXPECT_EQ(lock.status().fence, a.fence);
    last = a.fence;
    if (i % 2 == 0) {
      EXPECT_EQ(lock.release(a.value), Verdict::done);
    } else {
      clock.set(k_t0 + (i + 1) * 100);  // abandoned: the next one takes it over by GETSET
    }
  }
  EXPECT_EQ(last, 5);
  EXPECT_EQ(store.inner.get(k_fence_key), "5");
}

TEST(LockFencing, AcquireReportsTheToken) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_fence_key, "41");
  Lock lock(store, clock, k_key);
  lock::WaitPolicy policy;
  policy.wait_for = util::Micros(0);
  const auto result = lock.acquire(k_short_ttl, policy);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  EXPECT_EQ(result.fence, 42);
}

TEST(LockFencing, ATakeoverGetsItsTokenFromTheGetsetStepItself) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 1));  // a crashed holder's
  store.inner.set(k_fence_key, "7");
  Lock c4(store, clock, k_key);
  const Attempt a = c4.try_once(k_short_ttl);
  ASSERT_EQ(a.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(store.log, (std::vector<std::string>{"SETNX", "GET", "GETSET"}));
  EXPECT_EQ(a.fence, 8);
}

// C5 wins the takeover between C4's GET and GETSET: C4's GETSET returns a fresh
// value, so the step takes no token, and C5's token stays the latest.
TEST(LockFencing, TheLoserOfATakeoverTakesNoToken) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  store.inner.set(k_key, std::to_string(k_t0 - 1));
  Lock c4(store, clock, k_key);
  FakeClock c5_clock(k_t0 + 2);
  Lock c5(store, c5_clock, k_key);
  Attempt c5_attempt;
  store.hook_before = "GETSET";
  store.hook = [&] { c5_attempt = c5.try_once(k_short_ttl); };
  const Attempt c4_attempt = c4.try_once(k_short_ttl);
  ASSERT_EQ(c5_attempt.outcome, Attempt::Outcome::acquired);
  EXPECT_EQ(c4_attempt.outcome, Attempt::Outcome::busy);
  EXPECT_EQ(c4_attempt.fence, 0);
  EXPECT_EQ(c4.fence(), 0);
  EXPECT_EQ(store.inner.get(k_fence_key), std::to_string(c5_attempt.fence));
  EXPECT_EQ(c5.renew(c5_attempt.value, k_short_ttl).verdict, Verdict::done);
}

// A holds the lock; it is force-deleted and B takes it in
// the same second, writing the very same timestamp. The value alone cannot tell
// them apart; the token does. A can neither renew nor release B's lock, and
// says it was taken over; B keeps it.
TEST(LockFencing, TwoAcquisitionsWithTheSameValueAreNeverConfused) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock a(store, clock, k_key);
  const Attempt a_attempt = a.try_once(k_short_ttl);
  ASSERT_EQ(a_attempt.outcome, Attempt::Outcome::acquired);

  Lock forcer(store, clock, k_key);
  EXPECT_TRUE(forcer.force_release().removed);
  EXPECT_EQ(store.inner.get(k_fence_key), "1");  // unlock --force never resets it

  Lock b(store, clock, k_key);
  const Attempt b_attempt = b.try_once(k_short_ttl);
  ASSERT_EQ(b_attempt.outcome, Attempt::Outcome::acquired);
  ASSERT_EQ(b_attempt.value, a_attempt.value);  // the same bytes
  EXPECT_GT(b_attempt.fence, a_attempt.fence);

  clock.set(k_t0 + 1);
  EXPECT_EQ(a.renew(a_attempt.value, k_short_ttl).verdict, Verdict::taken_over);
  EXPECT_EQ(store.inner.get(k_key), b_attempt.value);
  EXPECT_EQ(a.release_after(a_attempt.value, util::Micros((k_t0 + 5) * 1'000'000)).verdict,
            Verdict::taken_over);
  EXPECT_EQ(a.release(a_attempt.value), Verdict::taken_over);
  EXPECT_EQ(store.inner.get(k_key), b_attempt.value);

  const lock::Renewed renewed = b.renew(b_attempt.value, k_short_ttl);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(b.release(renewed.value), Verdict::done);
  EXPECT_FALSE(store.inner.get(k_key).has_value());
}

// A Lock that took nothing itself (the `unlock KEY VALUE` and `renew` commands)
// goes by the value alone, as other clients of the page do.
TEST(LockFencing, ALockThatTookNothingGoesByTheValue) {
  ScriptedStore store;
  FakeClock clock(k_t0);
  Lock holder(store, clock, k_key);
  const Attempt a = holder.try_once(k_short_ttl);
  ASSERT_EQ(a.outcome, Attempt::Outcome::acquired);
  Lock from_shell(store, clock, k_key);
  EXPECT_EQ(from_shell.fence(), 0);
  const lock::Renewed renewed = from_shell.renew(a.value, k_short_ttl + 5);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(from_shell.release(renewed.value), Verdict::done);
  EXPECT_EQ(store.inner.get(k_fence_key), "1");
}

TEST(LockFencing, CompanionKeysShareTheLockKeysHashTag) {
  EXPECT_EQ(store::fence_key("backup"), "{backup}:fence:backup");
  EXPECT_EQ(store::holder_key("backup"), "{backup}:holder:backup");
  // A key with a valid tag keeps it; an empty or unclosed tag is no tag.
  EXPECT_EQ(store::fence_key("{jobs}.backup"), "{jobs}:fence:{jobs}.backup");
  EXPECT_EQ(store::fence_key("a{b}c"), "{b}:fence:a{b}c");
  EXPECT_EQ(store::fence_key("a{b"), "{a{b}:fence:a{b");
  // A '}' and no tag: named apart, in no particular slot (see keys.hpp).
  EXPECT_EQ(store::fence_key("a{}b"), "}fence:a{}b");
  EXPECT_EQ(store::fence_key("a}b"), "}fence:a}b");
}

// No two lock keys share a companion: "x" and "{x}" (the same hash tag) above all.
TEST(LockFencing, CompanionKeysOfDifferentLocksNeverCollide) {
  const std::vector<std::string> keys = {"x", "{x}", "{x}:fence", "{x}:fence:x", "x:fence",
                                         "{x}x", "x{x}", "a}b", "}fence:a}b", "{", "}", "{}",
                                         "{x}:queue:x:lease", "{x}:lease:{x}:queue:x", ""};
  std::set<std::string> seen;
  for (const auto& key : keys) {
    for (const char* suffix : {"fence", "holder", "queue"}) {
      EXPECT_TRUE(seen.insert(store::companion_key(key, suffix)).second) << key << " " << suffix;
    }
  }
}

// A lock named like a companion would write another lock's counter, details or
// queue: it is refused (64); any other name is a lock like any other.
TEST(LockFencing, ALockNamedLikeACompanionIsRefused) {
  for (const std::string key : {"x", "{x}", "a}b", "{b}", "a{b}c"}) {
    for (const char* suffix : {"fence", "holder", "queue"}) {
      const std::string companion = store::companion_key(key, suffix);
      EXPECT_TRUE(store::is_companion_key(companion)) << companion;
      EXPECT_TRUE(store::is_companion_key(store::companion_key(companion, "lease"))) << companion;
      store::MemoryStore store;
      FakeClock clock(k_t0);
      try {
        Lock refused(store, clock, companion);
        ADD_FAILURE() << companion << " was taken as a lock name";
      } catch (const util::Error& e) {
        EXPECT_EQ(e.kind(), util::ErrorKind::usage) << e.what();
      }
    }
  }
  for (const std::string key : {"{x}:fence", "{x}:fence:y", "{y}:holder:x", "}fence:", "{x}",
                                "x:fence:x", "{x}:other:x", "{x}:fence:{y}x"}) {
    EXPECT_FALSE(store::is_companion_key(key)) << key;
  }
}

}  // namespace
}  // namespace nxlock
