// A waiter's place in the waiters' queue (Store::queue), for Lock and SharedLock.
#pragma once

#include <string>

#include "lock/pacing.hpp"
#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock {

// A queued waiter's lease (Store's waiters' queue): a waiter killed while
// queued holds the others up for this long at most, plus a tick. Renewed on
// every step a waiter takes: at least every pacing::k_queue_tick_max while it waits.
// The turn's own (WaitersQueue::k_turn_lease): one near the front renews to
// what a turn cuts a farther one's to.
constexpr util::Micros k_queue_lease = store::WaitersQueue::k_turn_lease;
static_assert(k_queue_lease > pacing::k_queue_tick_max, "a waiting waiter keeps its lease");

// The lease of a waiter that saw `ahead` waiters before it at its last look:
// long enough for its next look (pacing::jittered_queue_tick of that many or
// fewer: the line only moves forward). A long one far back costs the others
// nothing more: the turn cuts it (WaitersQueue::k_turn_lease).
inline util::Micros queue_lease_for(std::int64_t ahead) {
  return k_queue_lease + pacing::queue_slowdown(ahead);
}

// A waiter's ticket in the queue: unique among the waiters of one key.
std::string make_ticket();

// Leaves the queue when a wait ends in any way but a step that left it
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
