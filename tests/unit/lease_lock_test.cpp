// LeaseLock over the memory and embedded stores: shared holders together, slots at
// most N, never beside an exclusive holder or the other kind, one counter's
// tokens in order, and a lease lost with the key its set held.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/keys.hpp"
#include "lock/lease_lock.hpp"
#include "lock/lock.hpp"
#include "store/file/file_store.hpp"
#include "store/lease_book.hpp"
#include "store/memory_store.hpp"
#include "store/redis/cluster.hpp"
#include "support/test_helpers.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using testing::FakeClock;

using lock::AcquireResult;
using lock::LeaseLock;
using lock::Lock;
using lock::Status;
using lock::Verdict;
using lock::WaitPolicy;

constexpr std::int64_t k_ttl = 60;

WaitPolicy try_once() {
  WaitPolicy policy;
  policy.wait_for = util::Micros(0);
  return policy;
}

template <class F>
util::ErrorKind error_kind_of(F&& f) {
  try {
    f();
  } catch (const util::Error& e) {
    return e.kind();
  }
  return util::ErrorKind::internal;  // nothing thrown: never what a test expects
}

class LeaseLockTest : public ::testing::Test {
 protected:
  FakeClock clock;
  store::MemoryStore store{[this] { return clock.now(); }};
  WaitPolicy once{util::Micros(0), -1, {}};
};

TEST_F(LeaseLockTest, SharedHoldersHoldTogetherAndKeepExclusiveOut) {
  LeaseLock first(store, clock, "k", 0);
  LeaseLock second(store, clock, "k", 0);
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
  EXPECT_FALSE(store.get(store::shared_key("k")));
  const auto taken = exclusive.acquire(10, once);
  ASSERT_EQ(taken.outcome, AcquireResult::Outcome::acquired);
  EXPECT_GT(taken.fence, b.fence);  // one counter orders shared and exclusive holders
}

TEST_F(LeaseLockTest, AnExclusiveHolderKeepsSharedOnesOut) {
  Lock exclusive(store, clock, "k");
  const auto held = exclusive.acquire(10, once);
  ASSERT_EQ(held.outcome, AcquireResult::Outcome::acquired);
  LeaseLock shared(store, clock, "k", 0);
  const auto busy = shared.acquire(10, once);
  EXPECT_EQ(busy.outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(std::to_string(busy.held_until), held.value);
  // Expired: the shared taker may come in, as a takeover would.
  clock.set(1'000'000'000LL + 12);
  EXPECT_EQ(shared.acquire(10, once).outcome, AcquireResult::Outcome::acquired);
}

TEST_F(LeaseLockTest, AnExpiredLeaseIsNoLongerHeldNorRenewed) {
  LeaseLock shared(store, clock, "k", 0);
  const auto a = shared.acquire(5, once);
  ASSERT_EQ(a.outcome, AcquireResult::Outcome::acquired);
  const lock::Renewed renewed = shared.renew(a.value, 7);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_NE(renewed.value, a.value);
  clock.set(1'000'000'000LL + 20);  // the holder died and stopped renewing
  Lock exclusive(store, clock, "k");
  EXPECT_EQ(exclusive.acquire(10, once).outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(shared.renew(renewed.value, 5).verdict, Verdict::expired);
  EXPECT_EQ(exclusive.status().shared_holders, 0u);
}

TEST_F(LeaseLockTest, RenewalMovesTheKeyWithTheLatestLease) {
  LeaseLock first(store, clock, "k", 0);
  LeaseLock second(store, clock, "k", 0);
  const auto a = first.acquire(5, once);
  const auto b = second.acquire(50, once);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 51));
  EXPECT_EQ(second.release(b.value), Verdict::done);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 6));  // back to the one left
  EXPECT_EQ(first.renew(a.value, 100).verdict, Verdict::done);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 101));
}

TEST_F(LeaseLockTest, RefusesValuesThatNameNoLeaseAndDataItMustNotBreak) {
  LeaseLock shared(store, clock, "k", 0);
  EXPECT_THROW(shared.release("1234"), util::Error);
  EXPECT_FALSE(lock::is_shared_value("1234"));
  EXPECT_FALSE(lock::is_shared_value("1234:sXYZ"));
  EXPECT_TRUE(lock::is_shared_value("1234:s0123456789abcdef"));
  store.set("k", "not a timestamp", store::k_plain_step);
  try {
    shared.acquire(10, once);
    FAIL() << "data was broken";
  } catch (const util::Error& e) {
    EXPECT_EQ(e.kind(), util::ErrorKind::data);
  }
}

TEST_F(LeaseLockTest, TheSharedLeasesKeyIsNoLockName) {
  EXPECT_TRUE(store::is_companion_key(store::shared_key("k")));
  EXPECT_THROW(Lock(store, clock, store::shared_key("k")), util::Error);
}

TEST(LeaseBookTest, ParsesWhatItWritesAndDropsWhatDoesNotParse) {
  store::LeaseBook book(std::string("s1 100\ngarbage\ns2 200\n"));
  EXPECT_EQ(book.size(), 2u);
  EXPECT_EQ(book.latest(), 200);
  book.prune(150);
  EXPECT_EQ(book.encode(), "s2 200\n");
}

TEST(LeaseBookTest, ASetHoldsItsKeyOnlyUnderItsOwnToken) {
  store::LeaseBook book(std::string("s1 100\n"));
  book.set_token(7);
  const store::LeaseBook read_back(book.encode());
  EXPECT_EQ(read_back.token(), 7);
  EXPECT_TRUE(read_back.holds(std::string("100"), 7));
  // Another holder's take issued a later token, with a timestamp of the same second.
  EXPECT_FALSE(read_back.holds(std::string("100"), 8));
  EXPECT_FALSE(read_back.holds(std::string("100"), std::nullopt));  // a page client's write
  EXPECT_FALSE(read_back.holds(std::string("101"), 7));
  // A set an older nxlock wrote has no token: its timestamp alone decides.
  const store::LeaseBook older(std::string("s1 100\n"));
  EXPECT_TRUE(older.holds(std::string("100"), 8));
  EXPECT_EQ(store::lease_gate(std::string("100"), 8, read_back, 0, 50), store::LeaseGate::held);
  EXPECT_EQ(store::lease_gate(std::string("100"), 7, read_back, 0, 50), store::LeaseGate::join);
}

TEST(LeaseBookTest, DetailsStayWithTheirLeaseAndGoWithIt) {
  store::LeaseBook book(std::string("s1 100 7 {\"pid\": 1}\ns2 200\n"));
  ASSERT_EQ(book.holders().size(), 2u);
  EXPECT_EQ(book.holders()[0].details, "7 {\"pid\": 1}");
  EXPECT_FALSE(book.holders()[1].details.has_value());
  book.put("s1", 300);  // a renewal keeps them
  EXPECT_TRUE(book.record_details("s2", "8 {}\nmore"));
  EXPECT_FALSE(book.record_details("s3", "9 {}"));
  EXPECT_EQ(book.encode(), "s1 300 7 {\"pid\": 1}\ns2 200 8 {}\n");
  book.remove("s1");
  EXPECT_EQ(book.encode(), "s2 200 8 {}\n");
}

TEST_F(LeaseLockTest, ValuesNameTheirKindByTheirForm) {
  EXPECT_EQ(lock::value_form("1795845065"), lock::ValueForm::exclusive);
  EXPECT_EQ(lock::value_form("1795845065:s0123456789abcdef"), lock::ValueForm::shared);
  EXPECT_EQ(lock::value_form("2:1795845065"), lock::ValueForm::slot);
  for (const std::string other : {"", "x", "0:1795845065", "02:1795845065", "1:x", "1795845065:sX"}) {
    EXPECT_EQ(lock::value_form(other), lock::ValueForm::other) << other;
  }
}

TEST_F(LeaseLockTest, ABareValueNeverReleasesLeasedHolders) {
  LeaseLock shared(store, clock, "k", 0);
  const auto a = shared.acquire(10, once);
  ASSERT_EQ(a.outcome, AcquireResult::Outcome::acquired);
  Lock shell(store, clock, "k");
  const std::string bare = *store.get("k");
  EXPECT_EQ(error_kind_of([&] { shell.release(bare); }), util::ErrorKind::usage);
  EXPECT_EQ(error_kind_of([&] { shell.renew(bare, 10); }), util::ErrorKind::usage);
  EXPECT_EQ(store.get("k"), bare);  // still held, by its shared holder
  EXPECT_EQ(shared.release(a.value), Verdict::done);
}

TEST_F(LeaseLockTest, ALeaseIsLostWithTheKeyItsSetHeld) {
  LeaseLock shared(store, clock, "k", 0);
  const auto a = shared.acquire(10, once);
  ASSERT_EQ(a.outcome, AcquireResult::Outcome::acquired);
  // A page client's GETSET: the key is someone else's now.
  store.set("k", std::to_string(1'000'000'000LL + 30), store::k_plain_step);
  EXPECT_EQ(shared.renew(a.value, 10).verdict, Verdict::taken_over);
  EXPECT_EQ(*store.get("k"), std::to_string(1'000'000'000LL + 30));  // never written over
  EXPECT_EQ(shared.release(a.value), Verdict::taken_over);
  EXPECT_EQ(Lock(store, clock, "k").status().shared_holders, 0u);
  // A page client's DEL: lost too, and the next taker starts a new set.
  store.del({"k"});
  EXPECT_EQ(shared.renew(a.value, 10).verdict, Verdict::absent);
  LeaseLock next(store, clock, "k", 0);
  const auto b = next.acquire(10, once);
  ASSERT_EQ(b.outcome, AcquireResult::Outcome::acquired);
  EXPECT_GT(b.fence, a.fence);
  EXPECT_EQ(shared.renew(a.value, 10).verdict, Verdict::held_by_other);
  EXPECT_EQ(Lock(store, clock, "k").status().shared_holders, 1u);
}

TEST_F(LeaseLockTest, ForceRemovesEveryKindAndItsRenewalFails) {
  LeaseLock a(store, clock, "k", 2);
  const auto got = a.acquire(10, once);
  ASSERT_EQ(got.outcome, AcquireResult::Outcome::acquired);
  EXPECT_TRUE(Lock(store, clock, "k").force_release().removed);
  EXPECT_NE(a.renew(got.value, 10).verdict, Verdict::done);
  EXPECT_FALSE(store.get(store::shared_key("k")).has_value());
}

TEST_F(LeaseLockTest, SlotsAtMostNAndNeverBesideTheOtherKinds) {
  LeaseLock a(store, clock, "dump", 2), b(store, clock, "dump", 2), c(store, clock, "dump", 2);
  const auto got_a = a.acquire(k_ttl, once);
  const auto got_b = b.acquire(k_ttl, once);
  ASSERT_EQ(got_a.outcome, AcquireResult::Outcome::acquired);
  ASSERT_EQ(got_b.outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(a.slot(), 1);
  EXPECT_EQ(b.slot(), 2);
  EXPECT_GT(b.fence(), a.fence());  // one counter for the key
  EXPECT_EQ(c.acquire(k_ttl, once).outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(Lock(store, clock, "dump").acquire(k_ttl, once).outcome,
            AcquireResult::Outcome::busy);
  EXPECT_EQ(LeaseLock(store, clock, "dump", 0).acquire(k_ttl, once).outcome,
            AcquireResult::Outcome::busy);
  const Status status = Lock(store, clock, "dump").status();
  EXPECT_EQ(status.shared_holders, 2u);
  EXPECT_STREQ(lock::lease_kind(status.shared), "slots");

  // A released slot goes to the next taker, with a token above both.
  EXPECT_EQ(a.release(got_a.value), Verdict::done);
  ASSERT_EQ(c.acquire(k_ttl, once).outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(c.slot(), 1);
  EXPECT_GT(c.fence(), b.fence());
}

TEST_F(LeaseLockTest, ASlotsValueActsOnItsSlotOnly) {
  LeaseLock a(store, clock, "dump", 2), b(store, clock, "dump", 2);
  const auto got_a = a.acquire(k_ttl, once);
  const auto got_b = b.acquire(k_ttl, once);
  ASSERT_EQ(got_b.outcome, AcquireResult::Outcome::acquired);
  clock.set(1'000'000'000LL + 5);
  const lock::Renewed renewal = b.renew(got_b.value, k_ttl + 30);
  EXPECT_EQ(renewal.verdict, Verdict::done);
  const std::string& renewed = renewal.value;
  EXPECT_NE(renewed, got_b.value);

  // `unlock dump 2:VALUE` from a shell: no acquisition of its own.
  LeaseLock shell(store, clock, "dump", lock::k_max_slots);
  EXPECT_EQ(error_kind_of([&] { shell.release(renewed); }), util::ErrorKind::usage);
  shell.use_slot(2);
  EXPECT_EQ(shell.release(got_b.value), Verdict::held_by_other);  // slot 2's old value
  EXPECT_EQ(shell.release(renewed), Verdict::done);
  EXPECT_EQ(Lock(store, clock, "dump").status().shared_holders, 1u);
  EXPECT_EQ(a.release(got_a.value), Verdict::done);
  EXPECT_FALSE(store.get("dump").has_value());
}

TEST_F(LeaseLockTest, StatusesShowEverySlot) {
  LeaseLock a(store, clock, "dump", 3), view(store, clock, "dump", 3);
  ASSERT_EQ(a.acquire(k_ttl, once).outcome, AcquireResult::Outcome::acquired);
  const auto all = view.statuses();
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].state, Status::State::held);
  EXPECT_EQ(all[1].state, Status::State::free);
  EXPECT_EQ(error_kind_of([&] { LeaseLock(store, clock, "dump", lock::k_max_slots + 1); }),
            util::ErrorKind::usage);
}

TEST(SlotKeys, ASlotIsACompanionOfItsKeyInTheKeysHashSlot) {
  EXPECT_EQ(store::slot_key("backup", 3), "{backup}:slot3:backup");
  EXPECT_EQ(store::slot_key("{jobs}.dump", 1), "{jobs}:slot1:{jobs}.dump");
  for (const std::string key : {"backup", "{jobs}.dump", "a{b}c"}) {
    const std::string slot = store::slot_key(key, 2);
    EXPECT_EQ(store::redis::key_slot(slot), store::redis::key_slot(key)) << slot;
    // The slot's own companions too, and the semaphore's one queue.
    EXPECT_EQ(store::redis::key_slot(store::fence_key(slot)), store::redis::key_slot(key));
    EXPECT_EQ(store::redis::key_slot(store::queue_key(key)), store::redis::key_slot(key));
  }
}

TEST(SlotKeys, SlotOfReadsWhatSlotKeyWrites) {
  for (const std::string key : {"backup", "{jobs}.dump", "a}b", "{x}:slot1:x"}) {
    for (const int slot : {1, 2, 10, 1000}) {
      const auto parsed = store::slot_of(store::slot_key(key, slot));
      ASSERT_TRUE(parsed.has_value()) << key << " " << slot;
      EXPECT_EQ(parsed->key, key);
      EXPECT_EQ(parsed->slot, slot);
    }
  }
  for (const std::string name :
       {"backup", "{b}:slot0:b", "{b}:slot01:b", "{b}:slot:b", "{b}:slotx:b", "{b}:slot-1:b",
        "{b}:fence:b", "{b}:slot1:c", "{b}:slot99999999999:b"}) {
    EXPECT_FALSE(store::slot_of(name).has_value()) << name;
  }
}

TEST(SlotKeys, ALockNamedLikeASlotIsRefused) {
  for (const std::string name :
       {"{b}:slot1:b", "{b}:slot01:b", "{jobs}:slot7:{jobs}.dump", "}slot2:a}b"}) {
    EXPECT_TRUE(store::is_companion_key(name)) << name;
    EXPECT_EQ(error_kind_of([&] { store::check_lock_key(name); }), util::ErrorKind::usage) << name;
  }
  // Companions of a slot are companions too; names merely like one are locks.
  EXPECT_TRUE(store::is_companion_key(store::fence_key("{b}:slot1:b")));
  for (const std::string name : {"{b}:slot:b", "{b}:slots1:b", "{b}:slot1:c", "b:slot1:b"}) {
    EXPECT_FALSE(store::is_companion_key(name)) << name;
  }
}

TEST(SlotValue, RoundTripsAndRefusesWhatNamesNoSlot) {
  EXPECT_EQ(lock::slot_value(3, "1795587227"), "3:1795587227");
  const auto parsed = lock::parse_slot_value("k", "3:1795587227", 3);
  EXPECT_EQ(parsed.slot, 3);
  EXPECT_EQ(parsed.value, "1795587227");
  for (const std::string text : {"1795587227", "4:1795587227", "0:1", ":1", "x:1", "-1:1", ""}) {
    EXPECT_EQ(error_kind_of([&] { lock::parse_slot_value("k", text, 3); }), util::ErrorKind::usage)
        << text;
  }
}

// The queued path, on the embedded store: each waiter a client of its own (a
// FileStore of its own, as another process would have), confirmed in line
// before the next one comes; a release of either slot goes to the first.
TEST(SlotQueue, SlotsGoToWaitersInArrivalOrder) {
  const std::string dir = testing::make_temp_dir("nxlock-semaphore");
  const std::string path = dir + "/store";
  store::FileStore store(path, {});
  lock::LocalClock clock;
  LeaseLock first(store, clock, "k", 2), second(store, clock, "k", 2);
  const auto got_first = first.acquire(k_ttl, try_once());
  const auto got_second = second.acquire(k_ttl, try_once());
  ASSERT_EQ(got_second.outcome, AcquireResult::Outcome::acquired);

  const auto in_line = [&] {
    const auto text = store.get(store::queue_key("k"));
    return text ? std::count(text->begin(), text->end(), '\n') : 0;
  };
  std::mutex mutex;
  std::vector<std::string> granted;
  std::vector<std::thread> waiters;
  for (const std::string name : {"a", "b", "c"}) {
    const auto before = in_line();
    waiters.emplace_back([&, name] {
      store::FileStore own(path, {});
      lock::LocalClock own_clock;
      LeaseLock waiter(own, own_clock, "k", 2);
      WaitPolicy policy;
      policy.wait_for = std::chrono::seconds(30);
      const auto got = waiter.acquire(k_ttl, policy);
      {
        const std::lock_guard<std::mutex> guard(mutex);
        granted.push_back(got.outcome == AcquireResult::Outcome::acquired ? name : "-" + name);
      }
      if (got.outcome == AcquireResult::Outcome::acquired) {
        waiter.release(got.value);  // the next in line takes this slot, or the other
      }
    });
    if (!testing::wait_until([&] { return in_line() != before; }, std::chrono::seconds(20))) {
      ADD_FAILURE() << name << " never stood in line";
      break;  // the slots are released and the waiters joined all the same
    }
  }
  EXPECT_EQ(second.release(got_second.value), Verdict::done);
  for (auto& waiter : waiters) {
    waiter.join();
  }
  EXPECT_EQ(granted, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(first.release(got_first.value), Verdict::done);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace nxlock
