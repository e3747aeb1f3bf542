// A waiter's place in the waiters' queue (Store::queue), for Lock and SharedLock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// What a queued waiter waits to take (list --waiters).
enum class WaiterKind { exclusive, shared, slots };
// "exclusive", "shared", "slots".
const char* waiter_kind_name(WaiterKind kind);

// What a ticket tells of its waiter: it carries them, so that every backend's
// queue holds them with no entry of its own and no step to keep one.
struct WaiterDetails {
  WaiterKind kind = WaiterKind::exclusive;
  std::int64_t pid = 0;
  std::int64_t since = 0;  // Unix seconds, by the waiter's clock, when it began to wait
  std::string host;        // cut to fit the ticket, and only [A-Za-z0-9._-] ('_' for others)
};

// A waiter's ticket in the queue: unique among the waiters of one key (random
// bits, pid, host, start). "q" + 8 hex digits + "-" + kind letter + pid + "-"
// + since + "-" + host, at most 63 bytes, of [A-Za-z0-9._-]: a file name, and a
// word of the embedded store's queue lines that an older nxlock still reads.
std::string make_ticket(WaiterKind kind);

// The details a ticket carries; nullopt for one of an older nxlock ("q" and
// 16 hex digits), which carries none, or anything else.
std::optional<WaiterDetails> details_of_ticket(std::string_view ticket);

// Leaves the queue when a wait ends in any way but a step that left it
// already: best effort, a waiter that cannot leave is dropped with its lease.
// `key` and `queue` must outlive the ticket.
class QueueTicket {
 public:
  QueueTicket(store::WaitersQueue& waiters, const std::string& key, const std::string& queue,
              WaiterKind kind = WaiterKind::exclusive)
      : m_waiters(waiters), m_key(key), m_queue(queue), m_ticket(make_ticket(kind)) {}
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
  std::string m_ticket;
  bool m_joined = false;
};

}  // namespace nxlock::lock
