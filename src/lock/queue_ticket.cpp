// QueueTicket: a waiter's place in the waiters' queue.
#include "lock/queue_ticket.hpp"

#include <unistd.h>

#include <cstdio>

#include "util/error.hpp"
#include "util/random.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

std::string make_ticket() {
  char text[24];
  std::snprintf(
      text, sizeof text, "q%016llx",
      static_cast<unsigned long long>(util::random_u64() ^ static_cast<std::uint64_t>(::getpid())));
  return text;
}

QueueTicket::~QueueTicket() {
  if (!m_joined) {
    return;
  }
  try {
    m_waiters.leave(m_key, m_queue, m_ticket);
  } catch (const util::Error& e) {
    util::trace(std::string("queue not left (the lease lapses): ") + e.what());
  }
}

}  // namespace nxlock::lock
