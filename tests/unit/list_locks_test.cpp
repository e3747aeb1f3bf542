// list_locks: the rows of `nxlock list` from a store's listing (slots, expiry, holder records).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/keys.hpp"
#include "lock/list_locks.hpp"
#include "store/memory_store.hpp"
#include "util/time.hpp"

namespace nxlock {
namespace {

constexpr std::int64_t k_now = 1'732'000'000;

class ListLocks : public ::testing::Test {
 protected:
  void hold(const std::string& key, std::int64_t expires_at) {
    ASSERT_TRUE(m_store
                    .set_if_absent(key, std::to_string(expires_at), store::fence_key(key),
                                   store::k_plain_step)
                    .set);
  }
  std::vector<std::string> keys(const std::string& pattern, bool with_expired = false) {
    std::vector<std::string> out;
    for (const auto& row : lock::list_locks(m_store, pattern, k_now, with_expired)) {
      out.push_back(row.key + (row.slot ? "#" + std::to_string(*row.slot) : ""));
    }
    return out;
  }
  store::MemoryStore m_store;
};

TEST_F(ListLocks, HeldLocksSortedWithoutTheKeysBesideThem) {
  hold("b", k_now + 10);
  hold("a", k_now);  // equal to now: still held
  m_store.set(store::companion_key("a", "holder"), "{}", store::k_plain_step);
  EXPECT_EQ(keys("*"), (std::vector<std::string>{"a", "b"}));
  const auto rows = lock::list_locks(m_store, "b", k_now, false);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].expires_at, k_now + 10);
  EXPECT_FALSE(rows[0].expired);
  EXPECT_TRUE(rows[0].fence.has_value());
  EXPECT_FALSE(rows[0].holder.has_value());
}

TEST_F(ListLocks, ExpiredOnlyWhenAsked) {
  hold("old", k_now - 1);
  hold("new", k_now + 5);
  EXPECT_EQ(keys("*"), (std::vector<std::string>{"new"}));
  EXPECT_EQ(keys("*", true), (std::vector<std::string>{"new", "old"}));
  EXPECT_TRUE(lock::list_locks(m_store, "old", k_now, true).at(0).expired);
}

TEST_F(ListLocks, EachSharedHolderIsARowWithTheDetailsItRecorded) {
  const std::int64_t until = util::whole_seconds(util::wall_now()) + 60;  // the store's clock
  store::SharedLeases& shared = *m_store.shared();
  for (const char* id : {"s0000000000000001", "s0000000000000002"}) {
    const std::string counter = store::fence_key("sh");
    const std::string leases = store::shared_key("sh");
    const std::string queue = store::queue_key("sh");
    store::SharedLeases::TakeRequest request;
    request.id = id;
    request.expiry = until;
    ASSERT_EQ(shared.take({"sh", counter, leases, queue}, request, store::k_plain_step).outcome,
              store::SharedLeases::Take::Outcome::taken);
  }
  lock::Holder who;
  who.host = "h";
  who.pid = 42;
  who.acquired_at = k_now;
  ASSERT_TRUE(
      shared.record_details(store::shared_key("sh"), "s0000000000000002", "7 " + who.to_json()));
  EXPECT_FALSE(shared.record_details(store::shared_key("sh"), "s00000000000000ff", "8 {}"));
  hold("ex", k_now + 5);
  const auto rows = lock::list_locks(m_store, "*", k_now, false);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].key, "ex");
  EXPECT_EQ(rows[0].shared_holders, 0u);
  for (const auto& row : {rows[1], rows[2]}) {
    EXPECT_EQ(row.key, "sh");
    EXPECT_EQ(row.shared_holders, 2u);
    EXPECT_EQ(row.expires_at, until);
  }
  EXPECT_EQ(rows[1].value, std::to_string(until) + ":s0000000000000001");
  EXPECT_FALSE(rows[1].holder.has_value());
  EXPECT_EQ(rows[2].value, std::to_string(until) + ":s0000000000000002");
  ASSERT_TRUE(rows[2].holder.has_value());
  EXPECT_EQ(rows[2].holder->pid, 42);
  EXPECT_EQ(rows[2].fence, 7);
  // Released, its details go with its lease.
  const std::string counter = store::fence_key("sh");
  const std::string leases = store::shared_key("sh");
  const std::string queue = store::queue_key("sh");
  ASSERT_TRUE(shared.release({"sh", counter, leases, queue},
                             {.id = "s0000000000000002", .expiry = {}, .token = {}},
                             store::k_plain_step));
  const auto left = lock::list_locks(m_store, "sh", k_now, false);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_FALSE(left[0].holder.has_value());
}

TEST_F(ListLocks, SlotsAreListedUnderTheirLocksKey) {
  const std::int64_t until = util::whole_seconds(util::wall_now()) + 60;  // the store's clock
  const std::string counter = store::fence_key("backup-1");
  const std::string leases = store::shared_key("backup-1");
  const std::string queue = store::queue_key("backup-1");
  store::SharedLeases::TakeRequest request;
  request.slots = 2;
  request.expiry = until;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(m_store.shared()
                  ->take({"backup-1", counter, leases, queue}, request, store::k_plain_step)
                  .outcome,
              store::SharedLeases::Take::Outcome::taken);
  }
  hold("deploy", k_now + 5);
  EXPECT_EQ(keys("*"), (std::vector<std::string>{"backup-1#1", "backup-1#2", "deploy"}));
  EXPECT_EQ(keys("backup-*"), (std::vector<std::string>{"backup-1#1", "backup-1#2"}));
  EXPECT_EQ(keys("deploy"), (std::vector<std::string>{"deploy"}));
}

TEST_F(ListLocks, HolderRecordOnlyWhenItDescribesTheValue) {
  hold("job", k_now + 5);
  m_store.set(store::holder_key("job"),
              R"({"value":")" + std::to_string(k_now + 5) + R"(","host":"h","pid":7})",
              store::k_plain_step);
  hold("stale", k_now + 5);
  m_store.set(store::holder_key("stale"), R"({"value":"1","host":"h","pid":8})",
              store::k_plain_step);
  const auto rows = lock::list_locks(m_store, "*", k_now, false);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows[0].holder.has_value());
  EXPECT_EQ(rows[0].holder->pid, 7);
  EXPECT_FALSE(rows[1].holder.has_value());
}

TEST(PrefixedPattern, ThePrefixMatchesItselfOnly) {
  EXPECT_EQ(lock::prefixed_pattern("", "backup-*"), "backup-*");
  EXPECT_EQ(lock::prefixed_pattern("app:", "*"), "app:*");
  EXPECT_EQ(lock::prefixed_pattern("a*[b]?\\", "x"), "a\\*\\[b\\]\\?\\\\x");
}

}  // namespace
}  // namespace nxlock
