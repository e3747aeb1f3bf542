// URL parsing: every scheme, the defaults, redaction and the usage errors.
#include <gtest/gtest.h>

#include "store/url.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using store::parse_url;
using store::Url;

util::ErrorKind kind_of(const std::string& text) {
  try {
    parse_url(text);
  } catch (const util::Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error for " << text;
  return util::ErrorKind::internal;
}

TEST(Url, RedisTcpDefaults) {
  const Url url = parse_url("redis://localhost");
  EXPECT_EQ(url.scheme, Url::Scheme::redis_tcp);
  EXPECT_EQ(url.host, "localhost");
  EXPECT_EQ(url.port, 6379);
  EXPECT_EQ(url.db, 0);
  EXPECT_FALSE(url.user);
  EXPECT_FALSE(url.password);
}

TEST(Url, RedisTcpEverything) {
  const Url url = parse_url("redis://ops:s%40cret@10.0.0.5:6380/3");
  EXPECT_EQ(url.host, "10.0.0.5");
  EXPECT_EQ(url.port, 6380);
  EXPECT_EQ(url.db, 3);
  EXPECT_EQ(url.user, "ops");
  EXPECT_EQ(url.password, "s@cret");
  EXPECT_EQ(url.redacted, "redis://ops:***@10.0.0.5:6380/3");
}

TEST(Url, PasswordOnlyAndIpv6) {
  const Url url = parse_url("redis://:pw@[::1]:7000");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 7000);
  EXPECT_FALSE(url.user);
  EXPECT_EQ(url.password, "pw");
  EXPECT_EQ(url.redacted.find("pw"), std::string::npos);
}

TEST(Url, RedissIsRedisOverTls) {
  const Url url = parse_url("rediss://:pw@cache.example:6380/2");
  EXPECT_EQ(url.scheme, Url::Scheme::redis_tcp);
  EXPECT_TRUE(url.tls);
  EXPECT_EQ(url.host, "cache.example");
  EXPECT_EQ(url.port, 6380);
  EXPECT_EQ(url.db, 2);
  EXPECT_EQ(url.redacted, "rediss://:***@cache.example:6380/2");
  EXPECT_EQ(parse_url("rediss://[::1]").port, 6379);
  EXPECT_FALSE(parse_url("redis://h").tls);
}

TEST(Url, SentinelListMasterAndDb) {
  const Url url = parse_url("redis+sentinel://u:p%40ss@s1,[::1]:26380,s3:1/mymaster/4");
  EXPECT_EQ(url.scheme, Url::Scheme::redis_sentinel);
  ASSERT_EQ(url.sentinels.size(), 3u);
  EXPECT_EQ(url.sentinels[0].host, "s1");
  EXPECT_EQ(url.sentinels[0].port, 26379);
  EXPECT_EQ(url.sentinels[1].host, "::1");
  EXPECT_EQ(url.sentinels[1].port, 26380);
  EXPECT_EQ(url.sentinels[2].port, 1);
  EXPECT_EQ(url.master, "mymaster");
  EXPECT_EQ(url.db, 4);
  EXPECT_EQ(url.user, "u");
  EXPECT_EQ(url.password, "p@ss");
  EXPECT_FALSE(url.tls);
  EXPECT_EQ(url.redacted, "redis+sentinel://u:***@s1,[::1]:26380,s3:1/mymaster/4");
  EXPECT_TRUE(parse_url("rediss+sentinel://s1/m").tls);
}

TEST(Url, ClusterSeeds) {
  const Url url = parse_url("redis://a:7000,[::1]:7001,c");
  EXPECT_EQ(url.scheme, Url::Scheme::redis_tcp);
  ASSERT_EQ(url.seeds.size(), 3u);
  EXPECT_EQ(url.host, "a");
  EXPECT_EQ(url.port, 7000);
  EXPECT_EQ(url.seeds[1].host, "::1");
  EXPECT_EQ(url.seeds[2].port, 6379);
  EXPECT_EQ(kind_of("redis://a,"), util::ErrorKind::usage);
}

TEST(Url, SentinelUsageErrors) {
  for (const char* text :
       {"redis+sentinel://s1", "redis+sentinel://s1/", "redis+sentinel://s1//0",
        "redis+sentinel://s1,/m", "redis+sentinel://s1:0/m", "redis+sentinel://s1/m/x"}) {
    EXPECT_EQ(kind_of(text), util::ErrorKind::usage) << text;
  }
}

TEST(Url, UnixSocket) {
  const Url url = parse_url("unix:///run/redis/redis.sock?db=2");
  EXPECT_EQ(url.scheme, Url::Scheme::redis_unix);
  EXPECT_EQ(url.path, "/run/redis/redis.sock");
  EXPECT_EQ(url.db, 2);
}

TEST(Url, FileStore) {
  const Url url = parse_url("file:///var/lib/nxlock");
  EXPECT_EQ(url.scheme, Url::Scheme::file);
  EXPECT_EQ(url.path, "/var/lib/nxlock");
  EXPECT_FALSE(url.durable);
  EXPECT_TRUE(parse_url("file:///x?sync=1").durable);
}

TEST(Url, BadOnesAreUsageErrors) {
  for (const char* text :
       {"http://x", "rediss://", "rediss://h:0", "redis://", "redis://h:0", "redis://h:65536",
        "redis://h:x", "redis://h:", "redis://h/x", "unix://relative.sock", "file://relative",
        "file:///x?y=1", "", "localhost:6379", "redis://[::1", "unix:///s?db=x"}) {
    EXPECT_EQ(kind_of(text), util::ErrorKind::usage) << text;
  }
}

TEST(Url, ErrorsNeverShowThePassword) {
  try {
    parse_url("redis://:topsecret@h:99999");
    FAIL();
  } catch (const util::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nxlock
