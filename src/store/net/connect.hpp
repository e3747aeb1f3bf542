// Connect: a socket to a server, resolved, connected and (TLS) shaken hands with by a deadline.
#pragma once

#include <memory>
#include <string>

#include "store/net/deadline.hpp"
#include "store/net/endpoint.hpp"
#include "store/net/transport.hpp"
#include "util/fd.hpp"

namespace nxlock::store::net {

// A connected, non-blocking, close-on-exec socket and the transport over it.
struct OpenSocket {
  util::UniqueFd fd;
  std::unique_ptr<Transport> transport;
};

// Connects to `host`:`port`, or to the endpoint's unix socket if it names
// one, trying each address the host resolves to; over TLS when the endpoint
// says so, its handshake done. All within `deadline`, but for name resolution,
// which poll cannot bound. Throws util::Error naming the endpoint: unavailable
// (unresolvable, refused, timed out), usage (a unix path too long), or the
// handshake's kind (permission for a certificate refused).
OpenSocket open_socket(const Endpoint& endpoint, const std::string& host, int port,
                       const Deadline& deadline);

}  // namespace nxlock::store::net
