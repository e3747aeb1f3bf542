// The store contract, fenced steps: the owning write and the fencing counter move as one.
// Every backend runs these (see store_contract.hpp); the lock layer relies on them.
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/keys.hpp"
#include "store/fenced_steps.hpp"
#include "store/make_store.hpp"
#include "store/url.hpp"
#include "unit/store_contract.hpp"
#include "util/error.hpp"

namespace nxlock::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t k_now = 1'732'000'000;
const std::string k_fresh = std::to_string(k_now + 10);
const std::string k_expired = std::to_string(k_now - 1);

// Tokens are compared, never counted: a backend issues the larger of the
// previous token plus one and its clock in microseconds (man page, FENCING
// TOKENS), so the values themselves are not 1, 2, 3.

// The embedded store keeps one counter for all its keys and each lock's token in
// the lock's own record: the counter key the steps name is not one of its keys.
bool keeps_one_counter(const store::Store& store) {
  return store.describe().front() == '/';
}

TEST_P(StoreContract, FencedSetIfAbsentTakesATokenOnlyWhenItSets) {
  const auto first = m_store->set_if_absent("k", "v1", "c", store::k_plain_step).fence;
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(*first, 0);
  // Not set: no token.
  EXPECT_EQ(m_store->set_if_absent("k", "v2", "c", store::k_plain_step).fence, std::nullopt);
  EXPECT_EQ(m_store->get("k"), "v1");
  // A deleted key is set again, with a higher token: the counter is never reset.
  EXPECT_EQ(m_store->del({"k"}), 1u);
  const auto second = m_store->set_if_absent("k", "v3", "c", store::k_plain_step).fence;
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(*second, *first);
  EXPECT_EQ(m_store->get("k"), "v3");
}

// A counter that was evicted, flushed or lost in a restart
// never makes a token go back.
TEST_P(StoreContract, TokensStayAboveEveryEarlierOneWhenTheCounterIsDeleted) {
  std::int64_t highest = 0;
  for (int i = 0; i < 5; ++i) {
    const auto token = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
    ASSERT_TRUE(token.has_value()) << i;
    EXPECT_GT(*token, highest) << i;
    highest = *token;
    ASSERT_TRUE(
        m_store->compare_and_delete("k", "v", store::Fence("c", *token), store::k_plain_step))
        << i;
    m_store->del({"c"});
  }
  // A counter set low by hand (a restored backup) does not either.
  m_store->set("c", "1", store::k_plain_step);
  const auto token = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(token.has_value());
  EXPECT_GT(*token, highest);
}

TEST_P(StoreContract, FencedGetAndSetTakesATokenOnlyWhenTheOldValueSaysItOwns) {
  // Absent: the write creates the lock, and owns it.
  auto swap = m_store->get_and_set("k", k_fresh, store::Takeover{"c", k_now}, store::k_plain_step);
  EXPECT_EQ(swap.old, std::nullopt);
  ASSERT_TRUE(swap.fence.has_value());
  std::int64_t highest = *swap.fence;

  // A fresh timestamp (and one equal to now: still held) is another's lock: the
  // value is set either way (GETSET), and no token is issued.
  for (const std::string& held : {k_fresh, std::to_string(k_now)}) {
    m_store->set("k", held, store::k_plain_step);
    swap = m_store->get_and_set("k", "mine", store::Takeover{"c", k_now}, store::k_plain_step);
    EXPECT_EQ(swap.old, held);
    EXPECT_EQ(swap.fence, std::nullopt) << held;
    EXPECT_EQ(m_store->get("k"), swap.written ? "mine" : held);
  }

  // Not a timestamp: never owned (the lock layer puts it back and refuses).
  for (const std::string data : {"data", "", "-5", "+5", "1e3", " 5", "1234567890123456789"}) {
    m_store->set("k", data, store::k_plain_step);
    swap = m_store->get_and_set("k", "mine", store::Takeover{"c", k_now}, store::k_plain_step);
    EXPECT_EQ(swap.old, data);
    EXPECT_EQ(swap.fence, std::nullopt) << "'" << data << "'";
  }

  // An expired timestamp (leading zeros and 18 digits too, as the lock layer parses them).
  for (const std::string& expired : {k_expired, std::string("0"), std::string("0000000001")}) {
    m_store->set("k", expired, store::k_plain_step);
    swap = m_store->get_and_set("k", k_fresh, store::Takeover{"c", k_now}, store::k_plain_step);
    EXPECT_EQ(swap.old, expired);
    ASSERT_TRUE(swap.fence.has_value()) << expired;
    EXPECT_GT(*swap.fence, highest) << expired;
    highest = *swap.fence;
    EXPECT_EQ(m_store->get("k"), k_fresh);
  }
  // The store's rule is the lock layer's: one definition (fenced_steps.hpp).
  EXPECT_TRUE(store::getset_owns(k_expired, k_now));
  EXPECT_FALSE(store::getset_owns(std::to_string(k_now), k_now));
}

TEST_P(StoreContract, AFencedStepOnACounterThatIsNoIntegerFailsAndWritesNothing) {
  m_store->set("c", "not a number", store::k_plain_step);
  if (keeps_one_counter(*m_store)) {
    // Not its counter: the step goes on, and leaves the key alone.
    EXPECT_TRUE(m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence.has_value());
    EXPECT_EQ(m_store->get("c"), "not a number");
    return;
  }
  try {
    m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
    ADD_FAILURE() << "no error for a counter that is no integer";
  } catch (const util::Error& e) {
    EXPECT_EQ(e.kind(), util::ErrorKind::data) << e.what();
  }
  EXPECT_EQ(m_store->get("k"), std::nullopt);

  m_store->set("k", k_expired, store::k_plain_step);
  EXPECT_THROW(m_store->get_and_set("k", k_fresh, store::Takeover("c", k_now), store::k_plain_step),
               util::Error);
  EXPECT_EQ(m_store->get("k"), k_expired);
  EXPECT_EQ(m_store->get("c"), "not a number");
}

TEST_P(StoreContract, FencedCompareAndSetNeedsTheValueAndTheToken) {
  const auto first = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(m_store->compare_and_set("k", "other", "new", store::Fence("c", *first),
                                        store::k_plain_step));
  EXPECT_FALSE(m_store->compare_and_set("k", "v", "new", store::Fence("c", *first + 1),
                                        store::k_plain_step));
  EXPECT_FALSE(m_store->compare_and_set("k", "v", "new", store::Fence("c", *first - 1),
                                        store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "v");
  EXPECT_TRUE(
      m_store->compare_and_set("k", "v", "new", store::Fence("c", *first), store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "new");
  // A renewal keeps the token: the next one still works with it.
  EXPECT_TRUE(m_store->compare_and_set("k", "new", "newer", store::Fence("c", *first),
                                       store::k_plain_step));
  EXPECT_TRUE(m_store->compare_and_set("k", "newer", "new", store::Fence("c", *first),
                                       store::k_plain_step));

  // Deleted and taken again with the same value: the same bytes, another owner.
  EXPECT_EQ(m_store->del({"k"}), 1u);
  const auto second = m_store->set_if_absent("k", "new", "c", store::k_plain_step).fence;
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(m_store->compare_and_set("k", "new", "newer", store::Fence("c", *first),
                                        store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "new");
  EXPECT_FALSE(
      m_store->compare_and_set("absent", "", "x", store::Fence("c", *second), store::k_plain_step));
  EXPECT_EQ(m_store->get("absent"), std::nullopt);
}

TEST_P(StoreContract, FencedCompareAndDeleteNeedsTheValueAndTheToken) {
  const auto first = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(m_store->del({"k"}), 1u);
  const auto second = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(m_store->compare_and_delete("k", "v", store::Fence("c", *first),
                                           store::k_plain_step));  // the first owner's
  EXPECT_FALSE(
      m_store->compare_and_delete("k", "w", store::Fence("c", *second), store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "v");
  EXPECT_TRUE(
      m_store->compare_and_delete("k", "v", store::Fence("c", *second), store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), std::nullopt);
  EXPECT_FALSE(
      m_store->compare_and_delete("k", "v", store::Fence("c", *second), store::k_plain_step));
  // Never reset: the next token is higher still.
  const auto third = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(third.has_value());
  EXPECT_GT(*third, *second);
}

// A compare-and-set by value alone (`renew KEY VALUE`, the page's clients) is
// the same acquisition going on: the holder's fenced steps still work after it.
TEST_P(StoreContract, APlainCompareAndSetKeepsTheLocksToken) {
  const auto token = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(token.has_value());
  EXPECT_TRUE(m_store->compare_and_set("k", "v", "w", std::nullopt, store::k_plain_step));
  EXPECT_TRUE(
      m_store->compare_and_set("k", "w", "x", store::Fence("c", *token), store::k_plain_step));
  EXPECT_TRUE(
      m_store->compare_and_delete("k", "x", store::Fence("c", *token), store::k_plain_step));
}

// A counter that went (evicted, deleted by hand) counts as the holder's: every
// acquisition writes it, so none came since. The holder's steps go on, and the
// counter reads as its token again. The lock layer's counter name: the embedded
// store answers it from the lock's own entry.
TEST_P(StoreContract, AnAbsentCounterIsTheHoldersAndIsWrittenBack) {
  const std::string counter = store::fence_key("k");
  const auto token = m_store->set_if_absent("k", "v", counter, store::k_plain_step).fence;
  ASSERT_TRUE(token.has_value());
  m_store->del({counter});
  EXPECT_TRUE(
      m_store->compare_and_set("k", "v", "w", store::Fence(counter, *token), store::k_plain_step));
  EXPECT_EQ(m_store->get(counter), std::to_string(*token));
  m_store->del({counter});
  EXPECT_TRUE(
      m_store->compare_and_delete("k", "w", store::Fence(counter, *token), store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), std::nullopt);
}

TEST_P(StoreContract, AFencedDeleteWakesWatchers) {
  const auto token = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(token.has_value());
  const auto watcher = m_store->watch("k");
  EXPECT_TRUE(
      m_store->compare_and_delete("k", "v", store::Fence("c", *token), store::k_plain_step));
  EXPECT_EQ(watcher->wait(2s, -1), store::WaitResult::changed);
}

// Many key/counter pairs: on the file store some share a stripe (locked once)
// and most do not (two stripes locked in order); binary-safe names too.
TEST_P(StoreContract, FencedStepsOnManyPairsOfKeys) {
  for (int i = 0; i < 300; ++i) {
    const std::string key = "key\n" + std::to_string(i);
    const std::string counter = std::string("counter\0", 8) + std::to_string(i * 7);
    const auto first = m_store->set_if_absent(key, "v", counter, store::k_plain_step).fence;
    ASSERT_TRUE(first.has_value()) << i;
    ASSERT_TRUE(m_store->compare_and_set(key, "v", k_expired, store::Fence(counter, *first),
                                         store::k_plain_step))
        << i;
    const auto swap =
        m_store->get_and_set(key, "w", store::Takeover{counter, k_now}, store::k_plain_step);
    ASSERT_TRUE(swap.fence.has_value()) << i;
    ASSERT_GT(*swap.fence, *first) << i;
    ASSERT_TRUE(m_store->compare_and_delete(key, "w", store::Fence(counter, *swap.fence),
                                            store::k_plain_step))
        << i;
    ASSERT_EQ(m_store->get(key), std::nullopt) << i;
  }
}

// Clients racing for one lock through their own handles: every acquisition has
// its own token, and tokens are issued in order without repeats.
TEST_P(StoreContract, RacingFencedAcquisitionsGetDistinctTokens) {
  const std::string name = m_store->describe();
  if (name == "memory") {
    return;  // one process, one thread: nothing can race (see the other tests)
  }
  constexpr int k_clients = 4;
  constexpr int k_rounds = 40;
  std::vector<std::vector<std::int64_t>> tokens(k_clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < k_clients; ++c) {
    threads.emplace_back([&, c] {
      store::ConnectOptions options;
      const auto client = store::make_store(
          store::parse_url(name.front() == '/' ? "file://" + name : name), options);
      const std::string value = "client" + std::to_string(c);
      for (int round = 0; round < k_rounds;) {
        if (const auto token =
                client->set_if_absent("race", value, "race:fence", store::k_plain_step).fence) {
          tokens[static_cast<std::size_t>(c)].push_back(*token);
          // Only the owner deletes, and only with its own token.
          if (!client->compare_and_delete("race", value, store::Fence{"race:fence", *token},
                                          store::k_plain_step)) {
            tokens[static_cast<std::size_t>(c)].push_back(-1);
          }
          ++round;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::set<std::int64_t> all;
  for (const auto& mine : tokens) {
    for (std::size_t i = 0; i < mine.size(); ++i) {
      ASSERT_GT(mine[i], 0) << "an owner could not release with its own token";
      if (i > 0) {
        EXPECT_GT(mine[i], mine[i - 1]);
      }
      EXPECT_TRUE(all.insert(mine[i]).second) << "token " << mine[i] << " issued twice";
    }
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(k_clients * k_rounds));
}

// Another handle (a later invocation, a reopened store) continues the counter.
TEST_P(StoreContract, TheCounterOutlivesTheHandle) {
  const std::string name = m_store->describe();
  if (name == "memory") {
    return;  // it lives in this process only
  }
  const auto first = m_store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(
      m_store->compare_and_delete("k", "v", store::Fence("c", *first), store::k_plain_step));
  store::ConnectOptions options;
  const auto reopened =
      store::make_store(store::parse_url(name.front() == '/' ? "file://" + name : name), options);
  const auto second = reopened->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(*second, *first);
}

}  // namespace
}  // namespace nxlock::testing
