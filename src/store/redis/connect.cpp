// Connect: non-blocking connects bounded by poll, one address after another, then TLS's handshake.
#include "store/redis/connect.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "store/redis/tls.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store::redis {

namespace {

using util::Error;
using util::ErrorKind;

// Starts a non-blocking connect and waits for it within the deadline.
// Returns the connected socket, or an invalid one with `error` set.
util::UniqueFd connect_one(int family, const sockaddr* address, socklen_t length,
                           util::Micros deadline, std::string& error, bool& timed_out) {
  util::UniqueFd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    error = errno_text(errno);
    return {};
  }
  if (::connect(fd.get(), address, length) == 0) {
    return fd;
  }
  if (errno != EINPROGRESS && errno != EINTR) {
    error = errno_text(errno);
    return {};
  }
  if (!wait_ready(fd.get(), IoStatus::want_write, deadline)) {
    timed_out = true;
    return {};
  }
  int so_error = 0;
  socklen_t so_length = sizeof so_error;
  if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &so_length) != 0) {
    so_error = errno;
  }
  if (so_error != 0) {
    error = errno_text(so_error);
    return {};
  }
  return fd;
}

// The TLS session over `fd`, its handshake done within the deadline.
std::unique_ptr<Transport> tls_transport(const Endpoint& endpoint, int fd, const std::string& host,
                                         const Deadline& deadline) {
  auto session = std::make_unique<TlsSession>(endpoint.tls, fd, host);
  for (;;) {
    const IoResult step = session->handshake();
    if (step.status == IoStatus::done) {
      return session;
    }
    if (step.status == IoStatus::want_read || step.status == IoStatus::want_write) {
      if (!wait_ready(fd, step.status, deadline.at)) {
        throw Error(ErrorKind::unavailable, endpoint.name, "TLS handshake " + deadline.passed());
      }
      continue;
    }
    throw Error(step.kind, endpoint.name,
                step.status == IoStatus::closed
                    ? "the server closed the connection during the TLS handshake"
                    : step.error);
  }
}

}  // namespace

OpenSocket open_socket(const Endpoint& endpoint, const std::string& host, int port,
                       const Deadline& deadline) {
  OpenSocket out;
  std::string error;
  bool timed_out = false;
  if (!endpoint.unix_path.empty()) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (endpoint.unix_path.size() >= sizeof address.sun_path) {
      throw Error(ErrorKind::usage, endpoint.name, "the socket path is too long");
    }
    std::memcpy(address.sun_path, endpoint.unix_path.c_str(), endpoint.unix_path.size() + 1);
    out.fd = connect_one(AF_UNIX, reinterpret_cast<const sockaddr*>(&address), sizeof address,
                         deadline.at, error, timed_out);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port_text = std::to_string(port);
    // Name resolution is the one step poll cannot bound; numeric hosts skip it.
    const int status = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found);
    if (status != 0) {
      throw Error(ErrorKind::unavailable, endpoint.name,
                  "cannot resolve '" + util::escape(host) + "': " + gai_strerror(status));
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
    for (const addrinfo* a = found; a != nullptr && !out.fd && !timed_out; a = a->ai_next) {
      out.fd = connect_one(a->ai_family, a->ai_addr, a->ai_addrlen, deadline.at, error, timed_out);
    }
    if (out.fd) {
      // Requests are written whole; Nagle would only delay them.
      const int one = 1;
      setsockopt(out.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  }
  if (!out.fd) {
    throw Error(
        ErrorKind::unavailable, endpoint.name,
        // "connect": a burst that overflows the server's accept queue
        // (tcp-backlog) looks like this, and a silent server does not.
        timed_out ? "connect " + deadline.passed() : (error.empty() ? "cannot connect" : error));
  }
  out.transport = endpoint.tls ? tls_transport(endpoint, out.fd.get(), host, deadline)
                               : make_plain_transport(out.fd.get());
  return out;
}

}  // namespace nxlock::store::redis
