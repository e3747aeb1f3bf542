// Cluster hash slots, against the Cluster specification's examples.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lock/holder.hpp"
#include "store/keys.hpp"
#include "store/redis/cluster.hpp"

namespace nxlock {
namespace {

using store::redis::key_slot;

TEST(ClusterSlot, Crc16OfTheSpec) {
  // The specification's check value: CRC16("123456789") = 0x31C3.
  EXPECT_EQ(key_slot("123456789"), 0x31C3 % 16384);
}

TEST(ClusterSlot, HashTags) {
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));  // empty first tag: whole key
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
}

// The keys nxlock keeps beside a lock (store/keys.hpp) land in its slot, so its
// scripts stay on one node; only a key with '}' but no valid tag cannot have that.
TEST(ClusterSlot, CompanionKeysShareTheLockKeysSlot) {
  for (const std::string& key :
       std::vector<std::string>{"backup", "{jobs}.backup", "a{b}c", "a{b", "{", "a:b", "ünï ☃",
                                std::string("n\0ul", 4)}) {
    EXPECT_EQ(key_slot(store::fence_key(key)), key_slot(key)) << key;
    EXPECT_EQ(key_slot(store::holder_key(key)), key_slot(key)) << key;
  }
  // A '}' and no valid tag: the wrapped name's tag ends at that '}'.
  for (const std::string key : {"a}b", "}", "a{}b", "x{}", "{}", "a{}b}c"}) {
    EXPECT_NE(key_slot(store::fence_key(key)), key_slot(key)) << key;
  }
}

}  // namespace
}  // namespace nxlock
