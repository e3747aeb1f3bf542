// send_ping: connect (store/net/connect), write the GET, read the answer
// (store/net/http_reader), retry once.
#include "run/ping_client.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "store/net/connect.hpp"
#include "store/net/http_reader.hpp"
#include "store/net/tls.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::run {

namespace {

using store::net::IoResult;
using store::net::IoStatus;
using util::Micros;

// Between a failed attempt and the retry: a restarting checker, or a dropped
// connection, heals in about this long.
constexpr Micros k_retry_pause{100'000};

struct PingAttempt {
  std::string error;    // "" when answered 2xx
  bool refused = false;  // a 4xx: the checker's verdict, not worth a retry
};

// One GET on a fresh connection (Connection: close), by `deadline`.
PingAttempt ping_once(const PingTarget& target, const std::string& request, Micros deadline,
                      std::shared_ptr<store::net::TlsContext>& tls) {
  const PingUrl& url = target.url;
  store::net::Endpoint endpoint;
  endpoint.name = url.shown();
  endpoint.host = url.host;
  endpoint.port = url.port;
  const double seconds =
      static_cast<double>(std::max(deadline - util::mono_now(), Micros(0)).count()) / 1e6;
  endpoint.timeout_seconds = seconds;
  const store::net::Deadline by{deadline, seconds, false};
  try {
    if (url.tls && !tls) {
      store::net::TlsConfig config;
      config.cacert = target.cacert;
      tls = store::net::make_tls_context(config, url.shown());
    }
    endpoint.tls = url.tls ? tls : nullptr;
    store::net::OpenSocket socket = store::net::open_socket(endpoint, url.host, url.port, by);
    if (const auto unsent =
            store::net::write_all(*socket.transport, socket.fd.get(), request, deadline)) {
      if (unsent->status == IoStatus::want_read || unsent->status == IoStatus::want_write) {
        return {"sending " + by.passed()};
      }
      return {unsent->error.empty() ? "the checker closed the connection" : unsent->error};
    }
    store::net::HttpReader reader;
    char buffer[4096];
    while (!reader.complete()) {
      if (reader.failed()) {
        return {"not an HTTP answer: " + reader.error()};
      }
      const IoResult step = socket.transport->read(buffer, sizeof buffer);
      if (step.status == IoStatus::done) {
        reader.feed(std::string_view(buffer, step.bytes));
        // The status line is all a ping needs; the body may be left unread.
        if (reader.head_done()) {
          break;
        }
      } else if (step.status == IoStatus::want_read || step.status == IoStatus::want_write) {
        if (!store::net::wait_ready(socket.fd.get(), step.status, deadline)) {
          return {"no answer: " + by.passed()};
        }
      } else if (step.status == IoStatus::closed) {
        reader.end_of_stream();
        if (!reader.head_done()) {
          return {"the checker closed the connection without an answer"};
        }
      } else {
        return {socket.transport->explain(step).error};
      }
    }
    const int status = reader.status();
    if (status >= 200 && status < 300) {
      return {};
    }
    return {"the checker answered HTTP " + std::to_string(status), status >= 400 && status < 500};
  } catch (const util::Error& e) {
    return {e.reason()};
  }
}

void pause_for(Micros pause) {
  timespec left{static_cast<time_t>(pause.count() / 1'000'000),
                static_cast<long>(pause.count() % 1'000'000 * 1000)};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

}  // namespace

std::string send_ping(const PingTarget& target, std::string_view suffix, std::string_view rid,
                      Micros deadline) {
  const std::string request = ping_request(target.url, suffix, rid);
  std::string label = "success";
  if (suffix == "/start") {
    label = "start";
  } else if (!suffix.empty()) {
    label = "exit status " + std::string(suffix.substr(1));
  }
  const std::string what = "ping " + target.url.shown() + " (" + label + ")";
  std::shared_ptr<store::net::TlsContext> tls;
  const Micros now = util::mono_now();
  PingAttempt first = ping_once(target, request, now + (deadline - now) / 2, tls);
  if (first.error.empty()) {
    util::trace(what + ": answered");
    return {};
  }
  util::trace(what + ": " + first.error);
  if (!first.refused && util::mono_now() + k_retry_pause < deadline) {
    pause_for(k_retry_pause);
    PingAttempt second = ping_once(target, request, deadline, tls);
    if (second.error.empty()) {
      util::trace(what + ": answered on the retry");
      return {};
    }
    util::trace(what + ": " + second.error);
    return second.error;
  }
  return first.error;
}

}  // namespace nxlock::run
