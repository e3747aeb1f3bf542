// SentinelLocator: finds a master through Redis Sentinels (SENTINEL get-master-addr-by-name).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/redis/connection.hpp"
#include "store/url.hpp"

namespace nxlock::store::redis {

// Asks each Sentinel in turn, each within its own --io-timeout, where the master
// is. The Sentinel that answered moves to the front and its connection stays
// open for the next ask (every reconnect asks again, and a lock's renewal asks
// between reconnects, so a failover is followed).
class SentinelLocator final : public net::Locator {
 public:
  // `name` is the redacted URL; `password` is the Sentinels' own, not the master's.
  SentinelLocator(std::string name, std::vector<HostPort> sentinels, std::string master,
                  std::optional<std::string> password, double timeout_seconds,
                  std::shared_ptr<net::TlsContext> tls);
  ~SentinelLocator() override;

  HostPort locate(std::optional<util::Micros> cap) override;
  std::optional<HostPort> recheck(const HostPort& current, std::optional<util::Micros> cap,
                                  bool thorough) override;
  void wrong_role(const HostPort& address, const std::string& role) override;
  std::string describe() const override { return "master '" + m_master + "'"; }

 private:
  std::unique_ptr<Connection> connect_to_sentinel(const HostPort& sentinel) const;
  // get-master-addr-by-name's answer: nullopt when the Sentinel does not know
  // the master. Throws for an error or a malformed reply.
  std::optional<HostPort> master_address(const redisReply& reply, const Command& command,
                                         const std::string& sentinel_name) const;

  std::string m_name;
  std::vector<HostPort> m_sentinels;
  std::string m_master;
  std::optional<std::string> m_password;
  double m_timeout_seconds;
  std::shared_ptr<net::TlsContext> m_tls;
  std::unique_ptr<Connection> m_connection;  // to m_sentinels.front(), if open
};

// True when `reply` to `command` says the server may no longer be the master:
// READONLY (demoted), MASTERDOWN, UNBLOCKED (a WAIT cut short by a role
// change), or a WAIT short of its replicas (they followed a new master).
bool says_demoted(const Command& command, const redisReply& reply);

}  // namespace nxlock::store::redis
