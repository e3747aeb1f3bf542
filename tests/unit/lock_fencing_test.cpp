// Fencing tokens on the SETNX page's lock: every acquisition, a takeover included, a token
// above every earlier one, from the step that took the lock; and the companion keys.
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
  store.inner.set(k_fence_key, "41", store::k_plain_step);
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
  store.inner.set(k_key, std::to_string(k_t0 - 1), store::k_plain_step);  // a crashed holder's
  store.inner.set(k_fence_key, "7", store::k_plain_step);
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
  store.inner.set(k_key, std::to_string(k_t0 - 1), store::k_plain_step);
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
