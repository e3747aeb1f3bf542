// RedisWatcher: a waiter's subscriber connection, on a key's wake and its turn channel.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/redis/connection.hpp"
#include "store/store.hpp"

namespace nxlock::store {

// Waits on a subscriber connection: any message on the key's channel means
// "look again". A broken subscriber connection is not an error for a waiter:
// it reports `changed` (a release may have gone unseen), and the next wait
// resubscribes; while that fails, it waits out its timeout as a poll tick.
class RedisWatcher final : public Watcher {
 public:
  // `setup` is the connection's (AUTH, SUBSCRIBE to the key's channel, and
  // to the ticket's turn channel when `ticket` is not empty).
  RedisWatcher(const net::Endpoint& endpoint, std::vector<std::vector<std::string>> setup,
               std::string ticket, std::shared_ptr<std::optional<util::Micros>> deadline)
      : m_connection(connect(endpoint, std::move(setup), *deadline)),
        m_deadline(std::move(deadline)),
        m_ticket(std::move(ticket)) {}

  WaitResult wait(util::Micros timeout, int interrupt_fd) override;
  int fd() const override { return m_connection->fd(); }

 private:
  static std::unique_ptr<redis::Connection> connect(const net::Endpoint& endpoint,
                                                    std::vector<std::vector<std::string>> setup,
                                                    const std::optional<util::Micros>& deadline);
  // True if a message came, or the connection broke (the caller looks again).
  bool take();
  bool resubscribe(util::Micros deadline);

  // A wake-up that names another queued waiter's ticket is not ours; '1' (a
  // DEL, a release with nobody queued, an older client) is everybody's, and so
  // is anything that is not a message (a subscription confirmed again), but
  // the confirmation of our turn channel: the setup's one SUBSCRIBE for two
  // channels reads the first confirmation, which arms both (the server
  // subscribes to every channel of the command before it answers), and leaves
  // the second one to us.
  bool for_us(const redisReply& reply) const;

  std::unique_ptr<redis::Connection> m_connection;
  std::shared_ptr<std::optional<util::Micros>> m_deadline;  // the store's (set_deadline)
  std::string m_ticket;  // empty: every message wakes us; else also subscribed to its turn channel
};

}  // namespace nxlock::store
