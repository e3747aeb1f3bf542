// Transport: the plain socket, recv and send through EINTR, and the wait on either.
#include "store/net/transport.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "util/poll.hpp"

namespace nxlock::store::net {

namespace {

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : m_fd(fd) {}

  IoResult read(char* buffer, std::size_t size) override {
    for (;;) {
      const ssize_t n = recv(m_fd, buffer, size, 0);
      if (n > 0) {
        return {IoStatus::done, static_cast<std::size_t>(n), {}};
      }
      if (n == 0) {
        return {IoStatus::closed, 0, {}};
      }
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return {IoStatus::want_read, 0, {}};
      }
      return {IoStatus::failed, 0, errno_text(errno)};
    }
  }

  IoResult write(const char* buffer, std::size_t size) override {
    for (;;) {
      // MSG_NOSIGNAL: a server that went away is an EPIPE here, not a SIGPIPE
      // that kills nxlock, and without touching the process's (and so the
      // child's) signal dispositions.
      const ssize_t n = send(m_fd, buffer, size, MSG_NOSIGNAL);
      if (n >= 0) {
        return {IoStatus::done, static_cast<std::size_t>(n), {}};
      }
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return {IoStatus::want_write, 0, {}};
      }
      if (errno == EPIPE || errno == ECONNRESET) {
        return {IoStatus::closed, 0, {}};
      }
      return {IoStatus::failed, 0, errno_text(errno)};
    }
  }

  bool pending() const override { return false; }

  bool idle_alive() override {
    // EOF (an idle-client timeout, a restart) or unexpected bytes (a reply we
    // stopped waiting for): either way this connection is of no more use.
    char byte = 0;
    const ssize_t n = recv(m_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

 private:
  int m_fd;
};

}  // namespace

std::unique_ptr<Transport> make_plain_transport(int fd) {
  return std::make_unique<PlainTransport>(fd);
}

bool wait_ready(int fd, IoStatus want, util::Micros deadline) {
  // Errors and hang-ups count as ready: the next read or write says which.
  pollfd entry{fd, static_cast<short>(want == IoStatus::want_read ? POLLIN : POLLOUT), 0};
  return util::poll_until(&entry, 1, deadline) > 0;
}

std::optional<IoResult> write_all(Transport& transport, int fd, std::string_view bytes,
                                  util::Micros deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const IoResult step = transport.write(bytes.data() + sent, bytes.size() - sent);
    if (step.status == IoStatus::done) {
      sent += step.bytes;
    } else if (step.status == IoStatus::want_read || step.status == IoStatus::want_write) {
      if (!wait_ready(fd, step.status, deadline)) {
        return step;
      }
    } else {
      return transport.explain(step);
    }
  }
  return std::nullopt;
}

std::string errno_text(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) {
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  }
  return text;
}

}  // namespace nxlock::store::net
