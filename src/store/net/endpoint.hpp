// Endpoint: where a connection goes, a fixed address or a Locator's answer at each connect.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "store/net/tls.hpp"
#include "store/url.hpp"
#include "util/time.hpp"

namespace nxlock::store::net {

// Where a server is, asked again at every connect: a failover moves it.
class Locator {
 public:
  virtual ~Locator() = default;
  // The address to connect to now. `cap` bounds the search as it bounds a
  // command. Throws util::Error (unavailable, permission) saying why not.
  virtual HostPort locate(std::optional<util::Micros> cap) = 0;
  // Asked between commands on a connection to `current`, the master it
  // found: the master's new address if it moved. `thorough`: `current` looks
  // demoted, so every Sentinel is asked (one may not have seen a failover that
  // another ran). Throws as locate().
  virtual std::optional<HostPort> recheck(const HostPort& current, std::optional<util::Micros> cap,
                                          bool thorough) {
    (void)current;
    (void)cap;
    (void)thorough;
    return std::nullopt;
  }
  // The server at `address` says (ROLE) it is `role`, not a master.
  virtual void wrong_role(const HostPort& address, const std::string& role) = 0;
  // Names the server, for messages: "master 'mymaster'".
  virtual std::string describe() const = 0;
};

// Where to connect and how errors name it.
struct Endpoint {
  std::string name;  // the redacted URL, for messages
  std::string host;  // TCP: a name or an address (IPv6 without [])
  int port = 6379;
  std::string unix_path;  // non-empty: a unix socket instead of TCP
  double timeout_seconds = 2.0;
  std::shared_ptr<TlsContext> tls;  // set: TLS over TCP
  // Set: host and port come from it at each connect, and ROLE must say master.
  std::shared_ptr<Locator> locator;
};

}  // namespace nxlock::store::net
