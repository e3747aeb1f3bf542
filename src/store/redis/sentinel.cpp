// SentinelLocator: the Sentinel client protocol's discovery step, one Sentinel after another.
#include "store/redis/sentinel.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>

#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::store::redis {

namespace {

using util::Error;
using util::ErrorKind;

std::string host_port_text(const HostPort& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

}  // namespace

SentinelLocator::SentinelLocator(std::string name, std::vector<HostPort> sentinels,
                                 std::string master, std::optional<std::string> password,
                                 double timeout_seconds, std::shared_ptr<TlsContext> tls)
    : m_name(std::move(name)),
      m_sentinels(std::move(sentinels)),
      m_master(std::move(master)),
      m_password(std::move(password)),
      m_timeout_seconds(timeout_seconds),
      m_tls(std::move(tls)) {}

SentinelLocator::~SentinelLocator() = default;

HostPort SentinelLocator::locate(std::optional<util::Micros> cap) {
  std::vector<std::string> unreachable;  // "HOST:PORT: why"
  std::vector<std::string> unknowing;    // Sentinels that do not know the master
  bool refused_password = false;
  for (std::size_t i = 0; i < m_sentinels.size(); ++i) {
    const HostPort sentinel = m_sentinels[i];
    const std::string sentinel_name = "Sentinel " + host_port_text(sentinel);
    if (i != 0 || !m_connection) {
      Endpoint endpoint;
      endpoint.name = sentinel_name;
      endpoint.host = sentinel.host;
      endpoint.port = sentinel.port;
      endpoint.timeout_seconds = m_timeout_seconds;
      endpoint.tls = m_tls;
      std::vector<std::vector<std::string>> setup;
      if (m_password) {
        setup.push_back({"AUTH", *m_password});
      }
      m_connection = std::make_unique<Connection>(std::move(endpoint), std::move(setup));
    }
    m_connection->set_cap(cap);
    const Command command{{"SENTINEL", "get-master-addr-by-name", m_master}, {}};
    try {
      const auto replies = m_connection->exchange({command});
      const redisReply& reply = *replies.front();
      if (reply.type == REDIS_REPLY_ERROR) {
        throw_reply_error(reply, command, sentinel_name);
      }
      if (reply.type == REDIS_REPLY_NIL) {
        unknowing.push_back(host_port_text(sentinel));
        m_connection.reset();
        continue;
      }
      // [host, port], both strings.
      int port = 0;
      if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 ||
          reply.element[0]->type != REDIS_REPLY_STRING ||
          reply.element[1]->type != REDIS_REPLY_STRING ||
          std::from_chars(reply.element[1]->str, reply.element[1]->str + reply.element[1]->len,
                          port)
                  .ec != std::errc() ||
          port <= 0 || port > 65535) {
        throw Error(ErrorKind::unavailable, sentinel_name,
                    "unexpected reply: " + describe_reply(reply));
      }
      HostPort master{std::string(reply.element[0]->str, reply.element[0]->len), port};
      if (util::tracing()) {
        util::trace("redis: " + sentinel_name + " says " + describe() + " is at " +
                    host_port_text(master));
      }
      // The spec's advice: the Sentinel that answered is asked first next time.
      std::rotate(m_sentinels.begin(), m_sentinels.begin() + static_cast<std::ptrdiff_t>(i),
                  m_sentinels.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return master;
    } catch (const Error& e) {
      if (util::tracing()) {
        util::trace("redis: " + sentinel_name + ": " + e.reason());
      }
      refused_password = refused_password || e.kind() == ErrorKind::permission;
      unreachable.push_back(host_port_text(sentinel) + ": " + e.reason());
      m_connection.reset();
    }
  }
  if (!unknowing.empty()) {
    throw Error(ErrorKind::unavailable, m_name,
                "no Sentinel knows master '" + m_master + "'" +
                    (unreachable.empty() ? "" : " (unreachable: " + join(unreachable) + ")"));
  }
  if (refused_password) {
    throw Error(ErrorKind::permission, m_name,
                "no Sentinel accepted the Sentinel password (" + join(unreachable) + ")");
  }
  throw Error(ErrorKind::unavailable, m_name, "no Sentinel reachable (" + join(unreachable) + ")");
}

void SentinelLocator::wrong_role(const HostPort& address, const std::string& role) {
  (void)address;
  (void)role;
  // The Sentinel that named it has not seen the failover yet: ask the others
  // first (with one Sentinel, it is simply asked again).
  m_connection.reset();
  std::rotate(m_sentinels.begin(), m_sentinels.begin() + 1, m_sentinels.end());
}

}  // namespace nxlock::store::redis
