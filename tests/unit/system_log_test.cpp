// The system log's datagrams: RFC 3164's form, as glibc's syslog(3) writes them.
#include "util/system_log.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace nxlock::util {
namespace {

TEST(SyslogDatagram, IsWhatGlibcSends) {
  // In UTC, and back to the zone the other tests run in afterwards.
  const char* zone = std::getenv("TZ");
  const std::string saved = zone != nullptr ? zone : "";
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  // 2026-03-05 07:08:09 UTC: the day is padded with a space, as "%e" does.
  const std::time_t when = 1772694489;
  EXPECT_EQ(syslog_datagram(LogLevel::info, "nxlock", 42, when, "event=taken key=k"),
            "<14>Mar  5 07:08:09 nxlock[42]: event=taken key=k");
  EXPECT_EQ(syslog_datagram(LogLevel::warning, "nxlock", 7, when, "x").substr(0, 4), "<12>");
  EXPECT_EQ(syslog_datagram(LogLevel::notice, "nxlock", 7, when, "x").substr(0, 4), "<13>");
  if (zone != nullptr) {
    ::setenv("TZ", saved.c_str(), 1);
  } else {
    ::unsetenv("TZ");
  }
  ::tzset();
}

TEST(SystemLog, NoSocketDropsTheLine) {
  SystemLog log("nxlock", "/nonexistent/nxlock-test/log");
  EXPECT_FALSE(log.send(LogLevel::info, "event=taken"));
}

}  // namespace
}  // namespace nxlock::util
