// protocol_probe: one request in the other protocol on a connection of its own, and its first answer.
#include "store/protocol_probe.hpp"

#include <functional>

#include <nlohmann/json.hpp>

#include "store/net/connect.hpp"
#include "store/net/http_reader.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using net::IoResult;
using net::IoStatus;

// Sends `request` and reads until `enough` says so, the server closes, or the
// deadline: what came (nothing if it could not connect).
std::string probe_exchange(const net::Endpoint& endpoint, const std::string& host, int port,
                           const std::string& request, const net::Deadline& deadline,
                           const std::function<bool(const std::string&)>& enough) {
  std::string got;
  try {
    net::OpenSocket socket = net::open_socket(endpoint, host, port, deadline);
    std::size_t sent = 0;
    while (sent < request.size()) {
      const IoResult step = socket.transport->write(request.data() + sent, request.size() - sent);
      if (step.status == IoStatus::done) {
        sent += step.bytes;
      } else if (step.status != IoStatus::want_read && step.status != IoStatus::want_write) {
        return got;
      } else if (!net::wait_ready(socket.fd.get(), step.status, deadline.at)) {
        return got;
      }
    }
    char buffer[4096];
    while (!enough(got) && got.size() < 64 * 1024) {
      const IoResult step = socket.transport->read(buffer, sizeof buffer);
      if (step.status == IoStatus::done) {
        got.append(buffer, step.bytes);
      } else if (step.status != IoStatus::want_read && step.status != IoStatus::want_write) {
        break;
      } else if (!socket.transport->pending() &&
                 !net::wait_ready(socket.fd.get(), step.status, deadline.at)) {
        break;
      }
    }
  } catch (const util::Error& e) {
    util::trace(std::string("probe: ") + e.what());
  }
  return got;
}

std::string backquoted(std::string_view text) {
  return "`" + util::escape(text, 60) + "`";
}

// What an HTTP server answers to GET /version: "etcd 3.4.23" from an etcd
// member, else its status line quoted.
std::optional<std::string> http_answer_at(const net::Endpoint& endpoint, const std::string& host,
                                          int port, const net::Deadline& deadline) {
  const std::string request =
      "GET /version HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  net::HttpReader reader;
  const auto enough = [&reader, fed = std::size_t(0)](const std::string& got) mutable {
    reader.feed(std::string_view(got).substr(fed));
    fed = got.size();
    return reader.complete() || reader.failed();
  };
  probe_exchange(endpoint, host, port, request, deadline, enough);
  reader.end_of_stream();
  if (reader.status_line().empty()) {
    return std::nullopt;  // no HTTP status line came
  }
  // etcd's /version: {"etcdserver":"3.4.23","etcdcluster":"3.4.0"}
  const nlohmann::json version = nlohmann::json::parse(reader.body(), nullptr, false);
  if (version.is_object() && version.contains("etcdserver") && version["etcdserver"].is_string()) {
    return "etcd " + util::escape(version["etcdserver"].get<std::string>(), 40);
  }
  return backquoted(reader.status_line());
}

// What a Redis server answers to PING: its first line quoted.
std::optional<std::string> redis_answer_at(const net::Endpoint& endpoint, const std::string& host,
                                           int port, const net::Deadline& deadline) {
  const std::string got =
      probe_exchange(endpoint, host, port, "*1\r\n$4\r\nPING\r\n", deadline,
                     [](const std::string& so_far) { return so_far.find("\r\n") != std::string::npos; });
  const auto eol = got.find("\r\n");
  if (eol == std::string::npos || eol == 0 || (got[0] != '+' && got[0] != '-')) {
    return std::nullopt;
  }
  return backquoted(std::string_view(got).substr(0, eol));
}

}  // namespace

std::optional<std::string> http_instead_of_redis(const net::Endpoint& endpoint,
                                                 const std::string& host, int port,
                                                 const net::Deadline& deadline) {
  const auto http = http_answer_at(endpoint, host, port, deadline);
  if (!http) {
    return std::nullopt;
  }
  return "not a Redis server (it closed the connection on a Redis command, and answers HTTP: " +
         *http + (http->starts_with("etcd ") ? "; its URLs are etcd://)" : ")");
}

std::optional<std::string> redis_instead_of_http(const net::Endpoint& endpoint,
                                                 const std::string& host, int port,
                                                 const net::Deadline& deadline) {
  const auto redis = redis_answer_at(endpoint, host, port, deadline);
  if (!redis) {
    return std::nullopt;
  }
  return "not an etcd v3 gateway (it closed the connection on an HTTP request, and answers "
         "Redis's PING with " + *redis + ": a Redis server? its URLs are redis://)";
}

}  // namespace nxlock::store
