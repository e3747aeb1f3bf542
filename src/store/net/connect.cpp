// Connect: non-blocking connects bounded by poll, retried while a full accept queue
// drops them, one address after another, then TLS's handshake.
#include "store/net/connect.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "store/net/tls.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/poll.hpp"

namespace nxlock::store::net {

namespace {

using util::Error;
using util::ErrorKind;

// A listener whose accept queue is full (a fleet's burst against the server's
// tcp-backlog) drops a TCP SYN, which the kernel sends again only 1 s later,
// then 3 s: past a 2 s --io-timeout. So while a connect is pending, another one
// starts every k_connect_retry, up to k_connect_attempts at once, and the
// first to connect wins; a unix socket's full queue (EAGAIN) is tried again
// after the same pause. A refusal or any other error ends it at once.
constexpr util::Micros k_connect_retry{250'000};
constexpr std::size_t k_connect_attempts = 8;

// The connected socket, from the first of the attempts to connect within the
// deadline; an invalid one with `error` set, or `timed_out`.
util::UniqueFd connect_one(int family, const sockaddr* address, socklen_t length,
                           util::Micros deadline, std::string& error, bool& timed_out) {
  std::vector<util::UniqueFd> pending;
  for (;;) {
    if (pending.size() < k_connect_attempts) {
      util::UniqueFd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd) {
        error = errno_text(errno);
        return {};
      }
      if (::connect(fd.get(), address, length) == 0) {
        return fd;
      }
      if (errno == EINPROGRESS || errno == EINTR) {
        pending.push_back(std::move(fd));
      } else if (errno != EAGAIN) {
        error = errno_text(errno);
        return {};
      }
    }
    const util::Micros now = util::mono_now();
    if (now >= deadline) {
      timed_out = true;
      return {};
    }
    std::vector<pollfd> fds;
    for (const auto& fd : pending) {
      fds.push_back({fd.get(), POLLOUT, 0});
    }
    if (util::poll_until(fds.data(), fds.size(), std::min(deadline, now + k_connect_retry)) == 0) {
      continue;  // none yet: one more attempt
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      int so_error = 0;
      socklen_t so_length = sizeof so_error;
      if (getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &so_error, &so_length) != 0) {
        so_error = errno;
      }
      if (so_error == 0) {
        return std::move(pending[i]);  // the others are closed with `pending`
      }
      error = errno_text(so_error);
      return {};
    }
  }
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

}  // namespace nxlock::store::net
