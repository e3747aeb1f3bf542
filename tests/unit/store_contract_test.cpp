// The store contract: every backend behaves like the Redis commands of the same names.
// Backends instantiate StoreContract in their own test files (see store_contract.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/make_store.hpp"
#include "store/url.hpp"
#include "unit/store_contract.hpp"
#include "util/fd.hpp"

namespace nxlock::testing {
namespace {

using namespace std::chrono_literals;
using store::WaitResult;

// Keys and values a shell can pass: every one must round-trip unchanged and stay
// distinct from every other.
std::vector<std::string> awkward_strings() {
  std::string every_byte;
  for (int i = 0; i < 256; ++i) {
    every_byte.push_back(static_cast<char>(i));
  }
  return {
      std::string("a\0b", 3),
      std::string("\0", 1),
      std::string("a"),
      std::string("a\0", 2),
      "two\nlines\n",
      "with spaces  and\ttabs",
      "ünïcødé ☃ 鍵",
      "-leading-dash",
      "--",
      every_byte,
      std::string(1000, 'k'),
  };
}

// describe() is how errors name the backend: one printable line, and a name a
// user can give back (a URL, or the store's path) to reach these very keys.
TEST_P(StoreContract, DescribesItself) {
  const std::string name = m_store->describe();
  ASSERT_FALSE(name.empty());
  EXPECT_EQ(m_store->describe(), name);
  for (const char c : name) {
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << "control byte in " << name;
  }
  if (name == "memory") {
    return;  // the tests' reference store lives in this process only
  }
  const auto reopened = store::make_store(
      store::parse_url(name.front() == '/' ? "file://" + name : name), store::ConnectOptions{});
  m_store->set("described", "here", store::k_plain_step);
  EXPECT_EQ(reopened->get("described"), "here") << name << " names another backend";
}

TEST_P(StoreContract, GetOfAMissingKeyIsAbsent) {
  EXPECT_EQ(m_store->get("missing"), std::nullopt);
}

TEST_P(StoreContract, SetIfAbsentSetsOnlyOnce) {
  EXPECT_TRUE(m_store->set_if_absent("k", "first", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(m_store->set_if_absent("k", "second", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "first");
}

TEST_P(StoreContract, AnEmptyValueIsAValueNotAbsence) {
  EXPECT_TRUE(m_store->set_if_absent("k", "", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "");
  EXPECT_FALSE(m_store->set_if_absent("k", "x", std::nullopt, store::k_plain_step));
}

TEST_P(StoreContract, GetAndSetReturnsTheOldValueAndSetsEitherWay) {
  EXPECT_EQ(m_store->get_and_set("k", "one", std::nullopt, store::k_plain_step).old, std::nullopt);
  EXPECT_EQ(m_store->get("k"), "one");
  EXPECT_EQ(m_store->get_and_set("k", "two", std::nullopt, store::k_plain_step).old, "one");
  EXPECT_EQ(m_store->get("k"), "two");
}

TEST_P(StoreContract, SetOverwritesOrCreates) {
  m_store->set("k", "one", store::k_plain_step);
  EXPECT_EQ(m_store->get("k"), "one");
  m_store->set("k", "two", store::k_plain_step);
  EXPECT_EQ(m_store->get("k"), "two");
}

TEST_P(StoreContract, DelCountsOnlyTheKeysItRemoved) {
  m_store->set("a", "1", store::k_plain_step);
  m_store->set("b", "2", store::k_plain_step);
  m_store->set("c", "3", store::k_plain_step);
  EXPECT_EQ(m_store->del({"a", "missing", "b", "a"}), 2u);  // like DEL: a counted once
  EXPECT_EQ(m_store->get("a"), std::nullopt);
  EXPECT_EQ(m_store->get("b"), std::nullopt);
  EXPECT_EQ(m_store->get("c"), "3");
  EXPECT_EQ(m_store->del({"missing"}), 0u);
  EXPECT_EQ(m_store->del({}), 0u);
}

TEST_P(StoreContract, ADeletedKeyCanBeSetAgain) {
  EXPECT_TRUE(m_store->set_if_absent("k", "1", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->del({"k"}), 1u);
  EXPECT_TRUE(m_store->set_if_absent("k", "2", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "2");
}

TEST_P(StoreContract, CompareAndDeleteOnlyOnAnExactMatch) {
  m_store->set("k", "mine", store::k_plain_step);
  EXPECT_FALSE(m_store->compare_and_delete("k", "theirs", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(m_store->compare_and_delete("k", "min", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(m_store->compare_and_delete("k", "mine ", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "mine");
  EXPECT_TRUE(m_store->compare_and_delete("k", "mine", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), std::nullopt);
  EXPECT_FALSE(
      m_store->compare_and_delete("k", "mine", std::nullopt, store::k_plain_step));  // absent
}

TEST_P(StoreContract, CompareAndSetOnlyOnAnExactMatch) {
  EXPECT_FALSE(m_store->compare_and_set("k", "", "new", std::nullopt,
                                        store::k_plain_step));  // absent is not ""
  EXPECT_EQ(m_store->get("k"), std::nullopt);
  m_store->set("k", "old", store::k_plain_step);
  EXPECT_FALSE(m_store->compare_and_set("k", "other", "new", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "old");
  EXPECT_TRUE(m_store->compare_and_set("k", "old", "new", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "new");
  EXPECT_FALSE(m_store->compare_and_set("k", "old", "newer", std::nullopt, store::k_plain_step));
  EXPECT_EQ(m_store->get("k"), "new");
}

TEST_P(StoreContract, KeysAndValuesAreBinarySafe) {
  const auto strings = awkward_strings();
  for (std::size_t i = 0; i < strings.size(); ++i) {
    // Each key holds the next string as its value, so a mix-up shows.
    const std::string& value = strings[(i + 1) % strings.size()];
    EXPECT_TRUE(m_store->set_if_absent(strings[i], value, std::nullopt, store::k_plain_step))
        << "key #" << i;
  }
  for (std::size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ(m_store->get(strings[i]), strings[(i + 1) % strings.size()]) << "key #" << i;
    EXPECT_EQ(m_store->get_and_set(strings[i], strings[i], std::nullopt, store::k_plain_step).old,
              strings[(i + 1) % strings.size()]);
    EXPECT_TRUE(m_store->compare_and_set(strings[i], strings[i], strings[i] + "!", std::nullopt,
                                         store::k_plain_step));
    EXPECT_TRUE(m_store->compare_and_delete(strings[i], strings[i] + "!", std::nullopt,
                                            store::k_plain_step))
        << "key #" << i;
  }
  EXPECT_EQ(m_store->del(strings), 0u);
}

TEST_P(StoreContract, HoldsALargeValue) {
  std::string value(100 * 1024, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) {
    value[i] = static_cast<char>((i * 7 + i / 256) % 256);
  }
  m_store->set("big", value, store::k_plain_step);
  EXPECT_EQ(m_store->get("big"), value);
  EXPECT_TRUE(m_store->compare_and_delete("big", value, std::nullopt, store::k_plain_step));
}

TEST_P(StoreContract, ManyDistinctKeys) {
  constexpr int k_count = 1000;
  std::vector<std::string> keys;
  for (int i = 0; i < k_count; ++i) {
    keys.push_back("key:" + std::to_string(i));
    EXPECT_TRUE(m_store->set_if_absent(keys.back(), std::to_string(i * i), std::nullopt,
                                       store::k_plain_step));
  }
  for (int i = 0; i < k_count; ++i) {
    ASSERT_EQ(m_store->get(keys[static_cast<std::size_t>(i)]), std::to_string(i * i));
  }
  EXPECT_EQ(m_store->del(keys), static_cast<std::size_t>(k_count));
  EXPECT_EQ(m_store->get("key:0"), std::nullopt);
}

TEST_P(StoreContract, NowIsTheWallClock) {
  // Generous: a Redis server on this host shares its clock; this catches units.
  const auto difference = m_store->now() - util::wall_now();
  EXPECT_LT(std::chrono::abs(difference), 60s);
}

TEST_P(StoreContract, WaitSeesADelMadeAfterWatch) {
  m_store->set("k", "1", store::k_plain_step);
  const auto watcher = m_store->watch("k");
  EXPECT_EQ(m_store->del({"k"}), 1u);  // wakes watchers by itself
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);
}

TEST_P(StoreContract, WaitSeesADeletion) {
  m_store->set("k", "1", store::k_plain_step);
  const auto watcher = m_store->watch("k");
  EXPECT_TRUE(m_store->compare_and_delete("k", "1", std::nullopt,
                                          store::k_plain_step));  // wakes watchers by itself
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);
}

TEST_P(StoreContract, AMultiKeyDelWakesTheWatchersOfEachKey) {
  m_store->set("a", "1", store::k_plain_step);
  m_store->set("b", "2", store::k_plain_step);
  const auto watch_a = m_store->watch("a");
  const auto watch_b = m_store->watch("b");
  EXPECT_EQ(m_store->del({"a", "b", "absent"}), 2u);
  EXPECT_EQ(watch_a->wait(2s, -1), WaitResult::changed);
  EXPECT_EQ(watch_b->wait(2s, -1), WaitResult::changed);
}

TEST_P(StoreContract, WaitWithoutAChangeTimesOut) {
  m_store->set("k", "1", store::k_plain_step);
  const auto watcher = m_store->watch("k");
  EXPECT_EQ(watcher->wait(50ms, -1), WaitResult::timed_out);
}

TEST_P(StoreContract, AReadableInterruptDescriptorInterrupts) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const util::UniqueFd read_end(fds[0]);
  const util::UniqueFd write_end(fds[1]);
  ASSERT_EQ(::write(write_end.get(), "x", 1), 1);
  const auto watcher = m_store->watch("k");
  EXPECT_EQ(watcher->wait(2s, read_end.get()), WaitResult::interrupted);
  char byte = 0;
  EXPECT_EQ(::read(read_end.get(), &byte, 1), 1);  // left for the caller to read
}

}  // namespace
}  // namespace nxlock::testing
