// ConnectOptions: how to reach a backend beyond its URL (password, timeout, TLS), and what for.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "store/net/tls.hpp"

namespace nxlock::store {

struct ConnectOptions {
  std::optional<std::string> password;  // overrides the URL's (from --password-file or env)
  double timeout_seconds = 2.0;         // Redis connect and per-command timeout
  net::TlsConfig tls;                   // rediss://: how to verify, what to present
  int replicas = 0;  // lock writes (SETNX, GETSET, compare-and-set) wait for this many replicas
  std::optional<std::string> sentinel_password;  // redis+sentinel://: the Sentinels' own
  // The command takes locks (lock, run-locked, renew): Redis refuses a server
  // that may evict them, or too old for the lock scripts (util::ErrorKind::config).
  bool for_locks = false;
  // This process renews the locks it takes for as long as it lives (run-locked):
  // the embedded store records it as their owner, and a caller whose clock
  // says such a lock expired does not take it while the owner runs.
  bool renews_while_alive = false;
  // doctor: the prefix of the keys a lock takes (--prefix), whose permissions
  // it checks (etcd's auth).
  std::string key_prefix;
  // Where a warning for the user goes (stderr, unless -q).
  std::function<void(const std::string&)> warn;
};

}  // namespace nxlock::store
