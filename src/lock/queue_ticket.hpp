// QueueTicket: a waiter's place in a lock's waiters' queue, left however the wait ends.
#pragma once

#include <string>

#include "store/store.hpp"

namespace nxlock::lock {

// A waiter's ticket in the queue: unique among the waiters of one key.
std::string make_ticket();

// Leaves the queue when a wait ends in any way but a SETNX that left it
// already: best effort, a waiter that cannot leave is dropped with its lease.
// `key` and `queue` must outlive the ticket.
class QueueTicket {
 public:
  QueueTicket(store::WaitersQueue& waiters, const std::string& key, const std::string& queue)
      : m_waiters(waiters), m_key(key), m_queue(queue) {}
  ~QueueTicket();
  QueueTicket(const QueueTicket&) = delete;
  QueueTicket& operator=(const QueueTicket&) = delete;

  const std::string& ticket() const { return m_ticket; }
  // Whether the ticket may be in the queue (joined before a step that may
  // have failed on the way back), so that it is left at the end.
  void joined(bool yes) { m_joined = yes; }

 private:
  store::WaitersQueue& m_waiters;
  const std::string& m_key;
  const std::string& m_queue;
  std::string m_ticket = make_ticket();
  bool m_joined = false;
};

}  // namespace nxlock::lock
