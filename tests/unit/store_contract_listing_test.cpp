// The store contract, listing (LockListing): every backend finds the same locks and what is
// kept beside them. Every backend runs these (see store_contract.hpp); `nxlock list` relies on
// them.
#include <set>
#include <string>
#include <vector>

#include "store/keys.hpp"
#include "store/lock_listing.hpp"
#include "unit/store_contract.hpp"

namespace nxlock::testing {
namespace {

using store::ListedLock;

std::vector<ListedLock> listed(
    store::Store& store, const std::string& pattern,
    const store::LockListing::Wanted& wanted = [](std::string_view) { return true; }) {
  std::vector<ListedLock> all;
  if (store.listing() == nullptr) {
    ADD_FAILURE() << store.describe() << " cannot list";
    return all;
  }
  store.listing()->list(pattern, wanted, [&](std::vector<ListedLock>&& batch) {
    for (auto& lock : batch) {
      all.push_back(std::move(lock));
    }
  });
  return all;
}

std::set<std::string> keys_of(const std::vector<ListedLock>& locks) {
  std::set<std::string> keys;
  for (const auto& lock : locks) {
    keys.insert(lock.key);
  }
  return keys;
}

TEST_P(StoreContract, ListingFindsLockValuesOnly) {
  ASSERT_NE(m_store->listing(), nullptr);
  EXPECT_TRUE(listed(*m_store, "*").empty());
  m_store->set("backup-a", "1732000000", store::k_plain_step);
  m_store->set("backup-b", "1732000001", store::k_plain_step);
  m_store->set("deploy", "1732000002", store::k_plain_step);
  m_store->set("name", "not a timestamp", store::k_plain_step);
  EXPECT_EQ(keys_of(listed(*m_store, "*")),
            (std::set<std::string>{"backup-a", "backup-b", "deploy"}));
  EXPECT_EQ(keys_of(listed(*m_store, "backup-*")), (std::set<std::string>{"backup-a", "backup-b"}));
  EXPECT_EQ(keys_of(listed(*m_store, "backup-[a]")), (std::set<std::string>{"backup-a"}));
  EXPECT_EQ(keys_of(listed(*m_store, "?eploy")), (std::set<std::string>{"deploy"}));
  EXPECT_TRUE(listed(*m_store, "nothing*").empty());
  const auto wanted = [](std::string_view key) { return key != "deploy"; };
  EXPECT_EQ(keys_of(listed(*m_store, "*", wanted)),
            (std::set<std::string>{"backup-a", "backup-b"}));
}

TEST_P(StoreContract, ListingReadsTheValueTokenAndHolderRecord) {
  const auto fence =
      m_store->set_if_absent("job", "1732000000", store::fence_key("job"), store::k_plain_step)
          .fence;
  ASSERT_TRUE(fence.has_value());
  m_store->set(store::companion_key("job", "holder"), R"({"value":"1732000000"})",
               store::k_plain_step);
  const auto locks =
      listed(*m_store, "*", [](std::string_view key) { return !store::is_companion_key(key); });
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].key, "job");
  EXPECT_EQ(locks[0].value, "1732000000");
  EXPECT_EQ(locks[0].fence, fence);
  EXPECT_EQ(locks[0].holder, std::optional<std::string>(R"({"value":"1732000000"})"));
  // A backend with a queue counts its waiters: none here.
  if (m_store->queue() != nullptr) {
    EXPECT_EQ(locks[0].waiters, std::optional<std::int64_t>(0));
  } else {
    EXPECT_FALSE(locks[0].waiters.has_value());
  }
}

TEST_P(StoreContract, ListingGoesThroughEveryBatch) {
  // More than one SCAN step of the Redis backend (COUNT 1000).
  for (int i = 0; i < 2500; ++i) {
    m_store->set("many-" + std::to_string(i), std::to_string(1732000000 + i), store::k_plain_step);
  }
  EXPECT_EQ(listed(*m_store, "many-*").size(), 2500u);
}

TEST_P(QueueContract, ListingCountsLiveWaiters) {
  ASSERT_TRUE(
      m_store->set_if_absent("k", "1732000000", store::fence_key("k"), store::k_plain_step).set);
  // Two waiters queue behind the holder, in the queue named after the lock.
  for (const std::string ticket : {"qa", "qb"}) {
    const auto queued = m_store->queue()->take_or_queue("k", "1732000001", store::fence_key("k"),
                                                        store::queue_key("k"), ticket, true,
                                                        k_long_lease, store::k_plain_step);
    ASSERT_NE(queued.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  }
  const auto locks = listed(*m_store, "k");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].waiters, std::optional<std::int64_t>(2));
  // A waiter that leaves is no longer counted.
  m_store->queue()->leave("k", store::queue_key("k"), "qa");
  EXPECT_EQ(listed(*m_store, "k").at(0).waiters, std::optional<std::int64_t>(1));
}

}  // namespace
}  // namespace nxlock::testing
