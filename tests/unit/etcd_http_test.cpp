// etcd's wire: the HTTP/1.1 reader (lengths, chunks, splits anywhere, refusals), base64,
// int64 as strings, prefix ranges, and etcd:// URLs.
#include <gtest/gtest.h>

#include "store/etcd/etcd_json.hpp"
#include "store/etcd/etcd_kv.hpp"
#include "store/net/http_reader.hpp"
#include "store/url.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using store::net::HttpReader;

TEST(EtcdHttpReader, ContentLengthAndTheNextResponseKept) {
  HttpReader reader;
  reader.feed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1");
  ASSERT_TRUE(reader.complete());
  EXPECT_EQ(reader.status(), 200);
  EXPECT_EQ(reader.body(), "{}");
  EXPECT_FALSE(reader.closes());
  EXPECT_EQ(reader.take_rest(), "HTTP/1.1");
}

TEST(EtcdHttpReader, ChunkedSplitAtEveryByte) {
  const std::string response =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;x=1\r\n{\"a\":\r\n3\r\n\"b\"\r\n1\r\n}\r\n0\r\n\r\n";
  for (std::size_t split = 0; split <= response.size(); ++split) {
    HttpReader reader;
    reader.feed(response.substr(0, split));
    std::string body = reader.take_body();
    reader.feed(response.substr(split));
    body += reader.take_body();
    ASSERT_TRUE(reader.complete()) << split;
    EXPECT_EQ(body, "{\"a\":\"b\"}") << split;
  }
}

TEST(EtcdHttpReader, AStreamDeliversEachChunkAsItComes) {
  HttpReader reader;
  reader.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n");
  EXPECT_FALSE(reader.complete());
  EXPECT_EQ(reader.take_body(), "{}\n");
  reader.end_of_stream();
  EXPECT_TRUE(reader.failed());
}

TEST(EtcdHttpReader, UntilCloseAndRefusals) {
  HttpReader close;
  close.feed("HTTP/1.0 200 OK\r\n\r\nbody");
  EXPECT_FALSE(close.complete());
  close.end_of_stream();
  EXPECT_TRUE(close.complete());
  EXPECT_EQ(close.body(), "body");
  for (const char* bad : {"-ERR unknown command\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    HttpReader reader;
    reader.feed(bad);
    EXPECT_TRUE(reader.failed()) << bad;
    EXPECT_EQ(reader.error().find('\n'), std::string::npos);
  }
}

TEST(EtcdHttpReader, WhatAnsweredIsKeptCut) {
  HttpReader reader;
  reader.feed("HTTP/1.0 200 OK\r\nServer: NotEtcd/1.0 \r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_TRUE(reader.complete());
  EXPECT_EQ(reader.status_line(), "HTTP/1.0 200 OK");
  EXPECT_EQ(reader.server(), "NotEtcd/1.0");
  HttpReader long_one;
  long_one.feed("HTTP/1.1 404 " + std::string(200, 'r') + "\r\nServer: " + std::string(200, 's') +
                "\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(long_one.complete());
  EXPECT_EQ(long_one.status_line().size(), HttpReader::k_quoted);
  EXPECT_EQ(long_one.server(), std::string(HttpReader::k_quoted, 's'));
  HttpReader not_http;
  not_http.feed("-ERR unknown command\r\n");
  EXPECT_TRUE(not_http.failed());
  EXPECT_EQ(not_http.status_line(), "");
}

TEST(EtcdJson, Base64RoundTripAndStrings) {
  for (const std::string& bytes : {std::string(), std::string("a"), std::string("ab"),
                                  std::string("abc"), std::string("\0\xff\x01 x", 5)}) {
    EXPECT_EQ(store::etcd::base64_decode(store::etcd::base64_encode(bytes)), bytes);
  }
  EXPECT_EQ(store::etcd::base64_encode("x"), "eA==");
  EXPECT_FALSE(store::etcd::base64_decode("e!=="));
  const auto answer = nlohmann::json::parse(
      R"({"revision":"42","TTL":5,"member_id":"18446744073709551615","key":"eA==","bad":"x"})");
  EXPECT_EQ(store::etcd::int_field(answer, "revision", "k"), 42);
  EXPECT_EQ(store::etcd::int_field(answer, "TTL", "k"), 5);
  EXPECT_EQ(store::etcd::int_field(answer, "absent", "k"), 0);
  EXPECT_EQ(store::etcd::int_field(answer, "member_id", "k"), -1);  // uint64 bits
  EXPECT_EQ(store::etcd::bytes_field(answer, "key", "k"), "x");
  EXPECT_THROW(store::etcd::int_field(answer, "bad", "k"), util::Error);
}

TEST(EtcdJson, PrefixEndAndLeaseHex) {
  EXPECT_EQ(store::etcd::prefix_end("a/"), "a0");
  EXPECT_EQ(store::etcd::prefix_end("a\xff"), "b");
  EXPECT_EQ(store::etcd::prefix_end(""), std::string(1, '\0'));
  EXPECT_EQ(store::etcd::lease_hex(0x694d8a2b3c4d5e6f), "694d8a2b3c4d5e6f");
}

TEST(EtcdUrl, MembersDefaultsAndRefusals) {
  const store::Url url = store::parse_url("etcd://u:p%40ss@a,b:2380,[::1]");
  EXPECT_EQ(url.scheme, store::Url::Scheme::etcd);
  ASSERT_EQ(url.seeds.size(), 3u);
  EXPECT_EQ(url.seeds[0].port, 2379);
  EXPECT_EQ(url.seeds[1].port, 2380);
  EXPECT_EQ(url.seeds[2].host, "::1");
  EXPECT_EQ(url.password, "p@ss");
  EXPECT_EQ(url.redacted.find("p%40ss"), std::string::npos);
  EXPECT_TRUE(store::parse_url("etcds://h").tls);
  for (const char* bad : {"etcd://", "etcd://h/x", "etcd://h?x=1", "etcd://h:0", "etcd://a,,b"}) {
    EXPECT_THROW(store::parse_url(bad), util::Error) << bad;
  }
}

}  // namespace
}  // namespace nxlock
