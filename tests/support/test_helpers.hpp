// Small helpers the unit tests share: a clock a test sets, a Redis URL, a thrown error, a
// temporary directory, a bounded wait on a condition.
// One definition each, so the unit tests can be built sixteen files to a translation unit.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "lock/clock.hpp"
#include "store/url.hpp"
#include "util/error.hpp"
#include "util/time.hpp"

namespace nxlock::testing {

// A clock that stands still until the test moves it (Unix time, whole seconds).
class FakeClock final : public lock::Clock {
 public:
  FakeClock() = default;
  explicit FakeClock(std::int64_t seconds) : m_now(util::Micros(seconds * 1'000'000)) {}
  util::Micros now() override { return m_now; }
  void set(std::int64_t seconds) { m_now = util::Micros(seconds * 1'000'000); }
  void set(util::Micros now) { m_now = now; }

 private:
  util::Micros m_now{1'000'000'000LL * 1'000'000};
};

// redis://127.0.0.1:PORT[/DB], parsed as nxlock would.
inline store::Url tcp_url(int port, int db = 0) {
  store::Url url;
  url.scheme = store::Url::Scheme::redis_tcp;
  url.host = "127.0.0.1";
  url.port = port;
  url.db = db;
  url.redacted = "redis://127.0.0.1:" + std::to_string(port) + (db ? "/" + std::to_string(db) : "");
  return url;
}

// Runs `body` and returns the util::Error it throws (failing the test if none).
template <typename Body>
util::Error error_from(Body&& body) {
  try {
    body();
  } catch (const util::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no util::Error thrown";
  return util::Error(util::ErrorKind::internal, "none", "none");
}

// Polls `condition` every `interval` until it holds or `timeout` passes; its last answer.
// The one poll loop of the tests: a wait on a condition, bounded.
template <typename Condition>
bool wait_until(Condition&& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(interval);  // the poll's interval; `timeout` bounds the wait
  }
  return condition();
}

// A fresh directory $TMPDIR/PREFIX-XXXXXX (/tmp without TMPDIR): scripts/test gives its
// run a TMPDIR of its own and fails if anything is left in it.
inline std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + " failed");
  }
  return pattern;
}

inline double seconds_since(util::Micros start) {
  return static_cast<double>((util::mono_now() - start).count()) / 1e6;
}

}  // namespace nxlock::testing
