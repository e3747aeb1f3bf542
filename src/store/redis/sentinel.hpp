// SentinelLocator: finds a master through Redis Sentinels (SENTINEL get-master-addr-by-name).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/redis/connection.hpp"
#include "store/url.hpp"

namespace nxlock::store::redis {

// Asks each Sentinel in turn, each within its own --timeout, where the master
// is. The Sentinel that answered moves to the front and its connection stays
// open for the next ask (every reconnect asks again, so a failover is followed).
class SentinelLocator final : public Locator {
 public:
  // `name` is the redacted URL; `password` is the Sentinels' own, not the master's.
  SentinelLocator(std::string name, std::vector<HostPort> sentinels, std::string master,
                  std::optional<std::string> password, double timeout_seconds,
                  std::shared_ptr<TlsContext> tls);
  ~SentinelLocator() override;

  HostPort locate(std::optional<util::Micros> cap) override;
  void wrong_role(const HostPort& address, const std::string& role) override;
  std::string describe() const override { return "master '" + m_master + "'"; }

 private:
  std::string m_name;
  std::vector<HostPort> m_sentinels;
  std::string m_master;
  std::optional<std::string> m_password;
  double m_timeout_seconds;
  std::shared_ptr<TlsContext> m_tls;
  std::unique_ptr<Connection> m_connection;  // to m_sentinels.front(), if open
};

}  // namespace nxlock::store::redis
