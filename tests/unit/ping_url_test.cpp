// --ping's URL: what is parsed, what may be shown, {key}, the run id and the request's bytes.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "run/ping_url.hpp"
#include "util/error.hpp"

namespace nxlock::run {
namespace {

TEST(PingUrl, ParsesSchemeHostPortPathAndQuery) {
  const PingUrl url = parse_ping_url("https://hc-ping.com/0f1e-uuid?create=1#frag");
  EXPECT_TRUE(url.tls);
  EXPECT_EQ(url.host, "hc-ping.com");
  EXPECT_EQ(url.port, 443);
  EXPECT_EQ(url.path, "/0f1e-uuid");
  EXPECT_EQ(url.query, "create=1");
  EXPECT_EQ(url.shown(), "https://hc-ping.com");

  const PingUrl v6 = parse_ping_url("http://[::1]:8000/p/");
  EXPECT_FALSE(v6.tls);
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 8000);
  EXPECT_EQ(v6.path, "/p");  // URL/start, not URL//start
  EXPECT_EQ(v6.shown(), "http://[::1]:8000");
}

TEST(PingUrl, RefusesWithoutShowingThePath) {
  for (const char* text : {"ftp://h/secret", "http://user:secret@h/x", "http:///secret",
                           "http://h:0/secret", "http://h:99999/secret", "http://h:x/secret",
                           "http://[::1/secret", "http://h/sec ret", "http://h/secret\n",
                           "hc-ping.com/secret"}) {
    try {
      (void)parse_ping_url(text);
      ADD_FAILURE() << text;
    } catch (const util::Error& e) {
      EXPECT_EQ(e.kind(), util::ErrorKind::usage) << text;
      EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
    }
  }
}

TEST(PingUrl, KeyIsPercentEncoded) {
  EXPECT_EQ(expand_key("https://h/ping/K/{key}", "nightly backup/db"),
            "https://h/ping/K/nightly%20backup%2Fdb");
  EXPECT_EQ(expand_key("{key}-{key}", "a.b_c~d"), "a.b_c~d-a.b_c~d");
  EXPECT_EQ(expand_key("no placeholder", "k"), "no placeholder");
}

TEST(PingUrl, RunIdsAreVersion4UuidsAndDiffer) {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    const std::string id = make_run_id();
    ASSERT_EQ(id.size(), 36u);
    EXPECT_EQ(id[8], '-');
    EXPECT_EQ(id[14], '4');
    EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

TEST(PingUrl, RequestAppendsSuffixAndRid) {
  const PingUrl url = parse_ping_url("http://127.0.0.1:8000/uuid?create=1");
  EXPECT_EQ(ping_request(url, "/start", "R"),
            "GET /uuid/start?create=1&rid=R HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            "User-Agent: nxlock\r\nConnection: close\r\n\r\n");
  const PingUrl bare = parse_ping_url("https://checks.example");
  EXPECT_EQ(ping_request(bare, "", "R").substr(0, 33), "GET /?rid=R HTTP/1.1\r\nHost: check");
}

}  // namespace
}  // namespace nxlock::run
