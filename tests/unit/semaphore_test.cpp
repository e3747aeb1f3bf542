// Semaphore (--slots): the slot keys, the SLOT:VALUE a user passes back, and N slot
// locks over the memory store.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lock/keys.hpp"
#include "lock/semaphore.hpp"
#include "store/file/file_store.hpp"
#include "store/memory_store.hpp"
#include "store/redis/cluster.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using lock::AcquireResult;
using lock::Semaphore;
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

TEST(SlotKeys, ASlotIsACompanionOfItsKeyInTheKeysHashSlot) {
  EXPECT_EQ(lock::slot_key("backup", 3), "{backup}:slot3:backup");
  EXPECT_EQ(lock::slot_key("{jobs}.dump", 1), "{jobs}:slot1:{jobs}.dump");
  for (const std::string key : {"backup", "{jobs}.dump", "a{b}c"}) {
    const std::string slot = lock::slot_key(key, 2);
    EXPECT_EQ(store::redis::key_slot(slot), store::redis::key_slot(key)) << slot;
    // The slot's own companions too, and the semaphore's one queue.
    EXPECT_EQ(store::redis::key_slot(lock::fence_key(slot)), store::redis::key_slot(key));
    EXPECT_EQ(store::redis::key_slot(lock::queue_key(key)), store::redis::key_slot(key));
  }
}

TEST(SlotKeys, SlotOfReadsWhatSlotKeyWrites) {
  for (const std::string key : {"backup", "{jobs}.dump", "a}b", "{x}:slot1:x"}) {
    for (const int slot : {1, 2, 10, 1000}) {
      const auto parsed = lock::slot_of(lock::slot_key(key, slot));
      ASSERT_TRUE(parsed.has_value()) << key << " " << slot;
      EXPECT_EQ(parsed->key, key);
      EXPECT_EQ(parsed->slot, slot);
    }
  }
  for (const std::string name :
       {"backup", "{b}:slot0:b", "{b}:slot01:b", "{b}:slot:b", "{b}:slotx:b", "{b}:slot-1:b",
        "{b}:fence:b", "{b}:slot1:c", "{b}:slot99999999999:b"}) {
    EXPECT_FALSE(lock::slot_of(name).has_value()) << name;
  }
}

TEST(SlotKeys, ALockNamedLikeASlotIsRefused) {
  for (const std::string name :
       {"{b}:slot1:b", "{b}:slot01:b", "{jobs}:slot7:{jobs}.dump", "}slot2:a}b"}) {
    EXPECT_TRUE(lock::is_companion_key(name)) << name;
    EXPECT_EQ(error_kind_of([&] { lock::check_lock_key(name); }), util::ErrorKind::usage) << name;
  }
  // Companions of a slot are companions too; names merely like one are locks.
  EXPECT_TRUE(lock::is_companion_key(lock::fence_key("{b}:slot1:b")));
  for (const std::string name : {"{b}:slot:b", "{b}:slots1:b", "{b}:slot1:c", "b:slot1:b"}) {
    EXPECT_FALSE(lock::is_companion_key(name)) << name;
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

class SemaphoreTest : public ::testing::Test {
 protected:
  store::MemoryStore m_store;
  lock::LocalClock m_clock;

  Semaphore semaphore(int slots = 2) { return Semaphore(m_store, m_clock, "dump", slots); }
};

TEST_F(SemaphoreTest, RefusesABadCountAndACompanionKey) {
  for (const int slots : {0, -1, lock::k_max_slots + 1}) {
    EXPECT_EQ(error_kind_of([&] { semaphore(slots); }), util::ErrorKind::usage) << slots;
  }
  EXPECT_EQ(error_kind_of([&] { Semaphore(m_store, m_clock, "{d}:slot1:d", 2); }),
            util::ErrorKind::usage);
}

TEST_F(SemaphoreTest, NHoldersTakeDistinctSlotsAndTheNextIsBusy) {
  Semaphore a = semaphore(), b = semaphore(), c = semaphore();
  const AcquireResult got_a = a.acquire(k_ttl, try_once());
  const AcquireResult got_b = b.acquire(k_ttl, try_once());
  ASSERT_EQ(got_a.outcome, AcquireResult::Outcome::acquired);
  ASSERT_EQ(got_b.outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(a.slot(), 1);
  EXPECT_EQ(b.slot(), 2);
  EXPECT_EQ(m_store.get(lock::slot_key("dump", 1)), got_a.value);
  EXPECT_EQ(m_store.get(lock::slot_key("dump", 2)), got_b.value);
  EXPECT_FALSE(m_store.get("dump").has_value());  // the key itself is never written
  // Each slot's token comes from its own counter.
  EXPECT_GT(a.fence(), 0);
  EXPECT_GT(b.fence(), 0);
  EXPECT_EQ(m_store.get(lock::fence_key(lock::slot_key("dump", 2))), std::to_string(b.fence()));

  const AcquireResult busy = c.acquire(k_ttl, try_once());
  EXPECT_EQ(busy.outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(busy.held_until, std::stoll(got_a.value));
  EXPECT_EQ(c.slot(), 0);
  EXPECT_EQ(c.fence(), 0);

  // A released slot goes to the next taker.
  EXPECT_EQ(a.release(got_a.value), Verdict::done);
  EXPECT_EQ(c.acquire(k_ttl, try_once()).outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(c.slot(), 1);
}

TEST_F(SemaphoreTest, RenewAndReleaseActOnTheChosenSlot) {
  Semaphore a = semaphore(), b = semaphore();
  const auto got_a = a.acquire(k_ttl, try_once());
  const auto got_b = b.acquire(k_ttl, try_once());
  ASSERT_EQ(got_b.outcome, AcquireResult::Outcome::acquired);
  std::string renewed;
  EXPECT_EQ(b.renew(got_b.value, k_ttl + 30, renewed), Verdict::done);
  EXPECT_EQ(m_store.get(lock::slot_key("dump", 2)), renewed);
  EXPECT_EQ(m_store.get(lock::slot_key("dump", 1)), got_a.value);

  // `unlock --slots 2 dump 2:VALUE` from a shell: no acquisition of its own.
  Semaphore shell = semaphore();
  EXPECT_EQ(error_kind_of([&] { shell.release(renewed); }), util::ErrorKind::internal);
  shell.use_slot(2);
  EXPECT_EQ(shell.release(got_a.value), Verdict::taken_over);  // slot 1's value
  EXPECT_EQ(shell.release(renewed), Verdict::done);
  EXPECT_FALSE(m_store.get(lock::slot_key("dump", 2)).has_value());
  EXPECT_EQ(m_store.get(lock::slot_key("dump", 1)), got_a.value);
  EXPECT_EQ(error_kind_of([&] { shell.use_slot(3); }), util::ErrorKind::usage);
}

TEST_F(SemaphoreTest, StatusIsHeldOnlyWhenEverySlotIs) {
  Semaphore a = semaphore(), b = semaphore(), view = semaphore();
  EXPECT_EQ(view.status().state, Status::State::free);
  ASSERT_EQ(a.acquire(k_ttl, try_once()).outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(view.status().state, Status::State::free);
  ASSERT_EQ(b.acquire(k_ttl, try_once()).outcome, AcquireResult::Outcome::acquired);
  EXPECT_EQ(view.status().state, Status::State::held);
  const auto all = view.statuses();
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].state, Status::State::held);
  EXPECT_EQ(all[0].fence, a.fence());
  EXPECT_EQ(all[1].fence, b.fence());
}

TEST_F(SemaphoreTest, ForceReleaseWithoutASlotDeletesEverySlot) {
  Semaphore a = semaphore(3), b = semaphore(3), shell = semaphore(3);
  ASSERT_EQ(a.acquire(k_ttl, try_once()).outcome, AcquireResult::Outcome::acquired);
  ASSERT_EQ(b.acquire(k_ttl, try_once()).outcome, AcquireResult::Outcome::acquired);
  std::optional<std::string> problem;
  EXPECT_TRUE(shell.force_release(problem));
  EXPECT_FALSE(problem.has_value());
  for (const int slot : {1, 2, 3}) {
    EXPECT_FALSE(m_store.get(lock::slot_key("dump", slot)).has_value()) << slot;
  }
  EXPECT_FALSE(shell.force_release(problem));
}

TEST_F(SemaphoreTest, AWaitThatTimesOutTakesNothing) {
  Semaphore a = semaphore(1), b = semaphore(1);
  ASSERT_EQ(a.acquire(k_ttl, try_once()).outcome, AcquireResult::Outcome::acquired);
  WaitPolicy briefly;
  briefly.wait_for = util::Micros(200'000);
  EXPECT_EQ(b.acquire(k_ttl, briefly).outcome, AcquireResult::Outcome::busy);
  EXPECT_EQ(b.slot(), 0);
}

// The queued path, on the embedded store: each waiter a client of its own (a
// FileStore of its own, as another process would have), confirmed in line
// before the next one comes; a release of either slot goes to the first.
TEST(SemaphoreQueue, SlotsGoToWaitersInArrivalOrder) {
  std::string dir = "/tmp/nxlock-semaphore-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/store";
  store::FileStore store(path, {});
  lock::LocalClock clock;
  Semaphore first(store, clock, "k", 2), second(store, clock, "k", 2);
  const auto got_first = first.acquire(k_ttl, try_once());
  const auto got_second = second.acquire(k_ttl, try_once());
  ASSERT_EQ(got_second.outcome, AcquireResult::Outcome::acquired);

  const auto in_line = [&] {
    const auto text = store.get(lock::queue_key("k"));
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
      Semaphore waiter(own, own_clock, "k", 2);
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
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (in_line() == before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (in_line() == before) {
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
