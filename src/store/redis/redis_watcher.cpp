// RedisWatcher: a waiter's subscriber connection, on a key's wake and its turn channel.
#include "store/redis/redis_watcher.hpp"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>

#include "store/redis/scripts.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

using redis::Connection;
using util::Error;
using util::ErrorKind;

WaitResult RedisWatcher::wait(util::Micros timeout, int interrupt_fd) {
  const util::Micros deadline = util::mono_now() + std::max(timeout, util::Micros(0));
  if (!m_connection->connected()) {
    if (resubscribe(deadline)) {
      return WaitResult::changed;  // a release while we were away went unseen
    }
  } else if (m_connection->buffered() && take()) {
    return WaitResult::changed;
  }
  for (;;) {
    const int fd = m_connection->fd();
    pollfd fds[2] = {{fd, POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
    // With no connection, only the interrupt: the timeout is the poll tick.
    pollfd* first = fd >= 0 ? fds : fds + 1;
    const nfds_t count = static_cast<nfds_t>((fd >= 0 ? 1 : 0) + (interrupt_fd >= 0 ? 1 : 0));
    if (util::poll_until(first, count, deadline) == 0) {
      return WaitResult::timed_out;
    }
    if (interrupt_fd >= 0 && fds[1].revents != 0) {
      return WaitResult::interrupted;  // left unread: it is the caller's
    }
    if (fd >= 0 && fds[0].revents != 0 && take()) {
      return WaitResult::changed;
    }
    // A TLS record that held no message (a session ticket): wait on.
    if (!m_connection->connected()) {
      return WaitResult::changed;
    }
  }
}

std::unique_ptr<Connection> RedisWatcher::connect(const net::Endpoint& endpoint,
                                                  std::vector<std::vector<std::string>> setup,
                                                  const std::optional<util::Micros>& deadline) {
  auto connection = std::make_unique<Connection>(endpoint, std::move(setup));
  connection->set_cap(deadline);
  try {
    connection->ensure_connected();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::unavailable) {
      throw;  // a password or certificate problem does not heal by waiting
    }
    // The server is away (a restart): the first wait() subscribes again, and
    // reports `changed` when it does, so nothing published meanwhile is missed.
    if (util::tracing()) {
      util::trace("redis: (subscriber) cannot subscribe yet: " + e.reason());
    }
  }
  return connection;
}

bool RedisWatcher::take() {
  try {
    if (m_ticket.empty()) {
      return m_connection->take_messages();
    }
    return m_connection->take_messages([&](const redisReply& reply) { return for_us(reply); });
  } catch (const Error& e) {
    if (util::tracing()) {
      util::trace("redis: (subscriber) " + e.reason() + "; will resubscribe");
    }
    m_connection->close();
    return true;
  }
}

bool RedisWatcher::resubscribe(util::Micros deadline) {
  // Bounded by the wait too: a waiter must stay responsive to its interrupt.
  std::optional<util::Micros> cap = *m_deadline;
  cap = cap ? std::min(*cap, deadline) : deadline;
  m_connection->set_cap(cap);
  try {
    m_connection->ensure_connected();
    return true;
  } catch (const Error& e) {
    if (util::tracing()) {
      util::trace("redis: (subscriber) cannot resubscribe: " + e.reason());
    }
    return false;
  }
}

bool RedisWatcher::for_us(const redisReply& reply) const {
  if (!m_ticket.empty() && reply.type == REDIS_REPLY_ARRAY && reply.elements == 3 &&
      reply.element[0]->type == REDIS_REPLY_STRING &&
      std::string_view(reply.element[0]->str, reply.element[0]->len) == "subscribe" &&
      reply.element[1]->type == REDIS_REPLY_STRING &&
      std::string_view(reply.element[1]->str, reply.element[1]->len) ==
          redis::turn_channel(m_ticket)) {
    return false;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 3 ||
      reply.element[0]->type != REDIS_REPLY_STRING ||
      std::string_view(reply.element[0]->str, reply.element[0]->len) != "message" ||
      reply.element[2]->type != REDIS_REPLY_STRING) {
    return true;
  }
  const std::string_view payload(reply.element[2]->str, reply.element[2]->len);
  return payload == "1" || payload == m_ticket;
}

}  // namespace nxlock::store
