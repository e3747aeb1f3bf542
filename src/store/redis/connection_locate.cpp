// Connection, located: connecting to the master an endpoint's Locator names (the Sentinel client
// protocol's connect loop), and following it when a failover moves it.
#include "store/redis/connection.hpp"

#include <hiredis/hiredis.h>

#include "store/redis/sentinel.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::store::redis {

namespace {

using util::Error;
using util::ErrorKind;

// How often a connect asks the Sentinels again when the server they name is
// not a master (mid-failover): then it gives up, and the caller retries later.
constexpr int k_locate_attempts = 3;

}  // namespace

void Connection::connect(const net::Deadline& deadline, std::optional<HostPort> first) {
  if (!m_endpoint.locator) {
    connect_to(m_endpoint.host, m_endpoint.port, deadline, false);
    return;
  }
  // The Sentinel client protocol: ask where the master is, connect, and check
  // ROLE there: a Sentinel that has not seen a failover yet may name a server
  // that is a replica now. Then ask again (another Sentinel first).
  net::Locator& locator = *m_endpoint.locator;
  std::string refused;
  for (int attempt = 0; attempt < k_locate_attempts; ++attempt) {
    const HostPort address = attempt == 0 && first ? *first : locator.locate(m_cap);
    const std::string where =
        locator.describe() + " at " + address.host + ":" + std::to_string(address.port);
    std::string role;
    try {
      role = connect_to(address.host, address.port, deadline_from_now(), true);
    } catch (const Error& e) {
      close();
      throw Error(e.kind(), e.subject(), where + ": " + e.reason());
    }
    if (role == "master") {
      if (util::tracing()) {
        util::trace("redis: connected to " + where);
      }
      m_located = address;
      m_located_for = m_cap;
      m_suspect = false;
      return;
    }
    close();
    locator.wrong_role(address, role);
    refused = where + " says it is a " + (role.empty() ? "server of unknown role" : role);
    if (util::tracing()) {
      util::trace("redis: " + refused + "; asking again");
    }
  }
  throw Error(ErrorKind::unavailable, m_endpoint.name, refused + ", not the master");
}

void Connection::follow_master() {
  // A failover leaves the old master taking writes (its replicas gone, so a
  // WAIT there confirms nothing) until the Sentinels demote it, seconds later:
  // a connection to it does not break, so the renewal must ask.
  const bool thorough = m_suspect;
  m_suspect = false;
  m_located_for = m_cap;
  // Half of what is left before the lock could expire, at most: a Sentinel
  // that hangs must not take the time the renewal itself needs.
  const util::Micros now = util::mono_now();
  const util::Micros ask_until = now + (*m_cap - now) / 2;
  std::optional<HostPort> moved;
  try {
    moved = m_endpoint.locator->recheck(*m_located, ask_until, thorough);
  } catch (const Error& e) {
    // No Sentinel answers: the server we have may well still be the master.
    if (util::tracing()) {
      util::trace("redis: asking where the master is: " + e.reason() + "; staying");
    }
    return;
  }
  if (!moved) {
    return;
  }
  if (util::tracing()) {
    util::trace("redis: " + m_endpoint.locator->describe() + " moved to " + moved->host + ":" +
                std::to_string(moved->port) + "; reconnecting");
  }
  close();
  connect(deadline_from_now(), moved);
}

void Connection::note_demotion(const std::vector<Command>& commands,
                               const std::vector<Reply>& replies) {
  for (std::size_t i = 0; i < replies.size() && i < commands.size() && !m_suspect; ++i) {
    if (says_demoted(commands[i], *replies[i])) {
      m_suspect = true;
      if (util::tracing()) {
        util::trace("redis: " + describe_reply(*replies[i]) +
                    ": the master may have moved; asking before the next command");
      }
    }
  }
}

}  // namespace nxlock::store::redis
