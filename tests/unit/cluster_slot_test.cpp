// Cluster hash slots and redirect parsing, against the Cluster specification's examples.
#include <gtest/gtest.h>

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

TEST(ClusterSlot, Redirects) {
  redisReply reply{};
  std::string text = "MOVED 3999 127.0.0.1:6381";
  reply.type = REDIS_REPLY_ERROR;
  reply.str = text.data();
  reply.len = text.size();
  auto redirect = store::redis::parse_redirect(reply);
  ASSERT_TRUE(redirect);
  EXPECT_FALSE(redirect->ask);
  EXPECT_EQ(redirect->slot, 3999);
  EXPECT_EQ(redirect->address.host, "127.0.0.1");
  EXPECT_EQ(redirect->address.port, 6381);
  text = "ASK 12 :7000";
  reply.str = text.data();
  reply.len = text.size();
  redirect = store::redis::parse_redirect(reply);
  ASSERT_TRUE(redirect);
  EXPECT_TRUE(redirect->ask);
  EXPECT_EQ(redirect->address.host, "");
  text = "ERR something";
  reply.str = text.data();
  reply.len = text.size();
  EXPECT_FALSE(store::redis::parse_redirect(reply));
}

}  // namespace
}  // namespace nxlock
