// Url: a parsed backend URL (redis://, rediss://, redis+sentinel://, unix://, file://, etcd://).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nxlock::store {

// One HOST:PORT of a list (Sentinels).
struct HostPort {
  std::string host;  // without [] for IPv6
  int port = 0;
};

// "host:port", "[::1]:port": an address as messages and requests name it.
std::string host_port_text(const HostPort& address);

struct Url {
  enum class Scheme { redis_tcp, redis_unix, redis_sentinel, file, etcd };

  Scheme scheme = Scheme::file;
  std::string host;                     // redis_tcp: name or address, without [] for IPv6
  int port = 6379;                      // redis_tcp
  bool tls = false;                     // redis_tcp: rediss://; etcd: etcds://
  std::string path;                     // redis_unix: socket path; file: store directory
  int db = 0;                           // redis_*: SELECT index
  std::optional<std::string> user;      // redis_*: ACL user
  std::optional<std::string> password;  // redis_*: from the URL itself
  std::vector<HostPort> sentinels;      // redis_sentinel: in the order given
  std::vector<HostPort> seeds;    // redis_tcp: HOST:PORT,HOST:PORT… (the first is host:port);
                                  // etcd: the cluster's members
  std::string master;             // redis_sentinel: the master's name
  bool durable = false;           // file: ?sync=1 fsyncs every write
  bool no_url = false;            // file: no URL given (NXLOCK_STORE, or the default)
  // file: no URL and no NXLOCK_STORE: the per-user default, private to its user.
  // A path named explicitly (file://, NXLOCK_STORE) honours the umask instead.
  bool is_default_store = false;

  // The URL as given, with any password replaced by "***": safe to print.
  std::string redacted;
};

// Parses a backend URL. Throws util::Error(usage) naming the (redacted) URL if
// the scheme is unknown or a part is malformed.
Url parse_url(std::string_view text);

// Replaces the password part of a redis:// URL with "***" (best effort, for messages).
std::string redact_url(std::string_view text);

}  // namespace nxlock::store
