// Connection: non-blocking sockets driven by poll, requests by redisFormatCommandArgv, replies by
// redisReader.
#include "store/redis/connection.hpp"

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "store/redis/sentinel.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/fd.hpp"
#include "util/trace.hpp"

namespace nxlock::store::redis {

namespace {

using util::Error;
using util::ErrorKind;
using util::Micros;

// Shown instead of AUTH's arguments in traces (ccache's k_redacted_secret).
constexpr std::string_view k_redacted_secret = "***";

constexpr std::size_t k_read_chunk = 16 * 1024;

// How often a connect asks the Sentinels again when the server they name is
// not a master (mid-failover): then it gives up, and the caller retries later.
constexpr int k_locate_attempts = 3;

struct ReaderDeleter {
  void operator()(redisReader* reader) const { redisReaderFree(reader); }
};

std::string lowercase_first(std::string text) {
  if (!text.empty()) {
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  }
  return text;
}

std::string errno_text(int error) {
  return lowercase_first(std::strerror(error));
}

// The scripts are long and say nothing in a trace line.
std::string argument_text(const Command& command, std::size_t i) {
  const std::string_view name = command.args.front();
  if (i > 0 && (name == "AUTH" || name == "auth")) {
    return std::string(k_redacted_secret);
  }
  if (i == 1 && name == "EVAL") {
    return "<script>";
  }
  return util::escape(command.args[i], k_trace_bytes);
}

// `redis: AUTH *** → OK`, with secrets and scripts elided: the setup of a
// connection. The commands of store operations are traced once, by
// TracingStore, as the operation they carry out.
void trace_command(const Command& command, const redisReply* reply, std::string_view failure) {
  std::string line = "redis:";
  for (std::size_t i = 0; i < command.args.size(); ++i) {
    line += ' ';
    line += argument_text(command, i);
  }
  line += " → ";
  line += reply ? describe_reply(*reply) : std::string(failure);
  util::trace(line);
}

// Waits until fd is ready for `events` or the deadline passes (false).
bool wait_ready(int fd, short events, Micros deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int timeout = util::poll_timeout_ms(deadline - util::mono_now());
    const int ready = poll(&entry, 1, timeout);
    if (ready > 0) {
      return true;  // errors and hang-ups too: the next read or write says which
    }
    if (ready == 0) {
      if (util::mono_now() >= deadline) {
        return false;
      }
      continue;
    }
    if (errno != EINTR) {
      throw Error(ErrorKind::internal, "poll", std::strerror(errno));
    }
    // EINTR: the deadline is absolute, the retry waits only what is left.
  }
}

}  // namespace

void ReplyDeleter::operator()(redisReply* reply) const {
  freeReplyObject(reply);
}

// The connected socket, its TLS session if any, and the reply parser.
struct Connection::Socket {
  util::UniqueFd fd;
  std::unique_ptr<TlsSession> tls;
  std::unique_ptr<redisReader, ReaderDeleter> reader;
  // Nothing but the setup has run on it yet: just connected, it needs no
  // check for having been closed while idle (one syscall less per invocation).
  bool fresh = true;

  IoResult read(char* buffer, std::size_t size) {
    if (tls) {
      return tls->read(buffer, size);
    }
    for (;;) {
      const ssize_t n = recv(fd.get(), buffer, size, 0);
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

  IoResult write(const char* buffer, std::size_t size) {
    if (tls) {
      return tls->write(buffer, size);
    }
    for (;;) {
      // MSG_NOSIGNAL: a server that went away is an EPIPE here, not a SIGPIPE
      // that kills nxlock, and without touching the process's (and so the
      // child's) signal dispositions.
      const ssize_t n = send(fd.get(), buffer, size, MSG_NOSIGNAL);
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
};

// A deadline and how to explain having passed it.
struct Connection::Deadline {
  Micros at;
  double seconds;  // the budget it gave
  bool capped;     // the cap (the lock's expiry), not --timeout, set it

  std::string passed() const {
    std::ostringstream out;
    out << "timed out after " << util::seconds_text(Micros(static_cast<long long>(seconds * 1e6)));
    if (capped) {
      out << " (the deadline of the lock it serves)";
    }
    return out.str();
  }
};

Connection::Connection(Endpoint endpoint, std::vector<std::vector<std::string>> setup)
    : m_endpoint(std::move(endpoint)), m_setup(std::move(setup)) {}

Connection::~Connection() = default;

bool Connection::connected() const {
  return m_socket != nullptr;
}

int Connection::fd() const {
  return m_socket ? m_socket->fd.get() : -1;
}

void Connection::close() {
  m_socket.reset();
}

bool Connection::tls_pending() const {
  return m_socket && m_socket->tls && m_socket->tls->pending();
}

bool Connection::buffered() const {
  // The reader may hold bytes that came with an earlier reply (a message
  // published right after SUBSCRIBE's confirmation): the socket will not turn
  // readable for them.
  return tls_pending() || (m_socket && m_socket->reader->pos < m_socket->reader->len);
}

Connection::Deadline Connection::deadline_from_now() const {
  const Micros now = util::mono_now();
  Micros at = now + Micros(static_cast<long long>(m_endpoint.timeout_seconds * 1e6));
  bool capped = false;
  if (m_cap && *m_cap < at) {
    at = std::max(*m_cap, now);
    capped = true;
  }
  const double seconds =
      capped ? static_cast<double>((at - now).count() / 1000) / 1000.0 : m_endpoint.timeout_seconds;
  return {at, seconds, capped};
}

void Connection::fail(ErrorKind kind, const std::string& reason) {
  close();
  throw Error(kind, m_endpoint.name, reason);
}

void Connection::fail_closed(const IoResult& result) {
  if (m_socket && m_socket->tls && result.kind != ErrorKind::permission) {
    // A TLS 1.3 server judges our certificate after our side of the handshake
    // is done, then closes: its alert may still be readable, and says why.
    char byte = 0;
    const IoResult alert = m_socket->tls->read(&byte, 1);
    if (alert.status == IoStatus::failed && alert.kind == ErrorKind::permission) {
      fail(alert.kind, alert.error);
    }
  }
  if (result.status == IoStatus::closed) {
    fail(ErrorKind::unavailable, "server closed the connection");
  }
  fail(result.kind, result.error);
}

void Connection::ensure_connected() {
  if (m_socket && !m_socket->fresh && !idle_connection_alive()) {
    if (util::tracing()) {
      util::trace("redis: the server closed the idle connection; reconnecting");
    }
    close();
  }
  if (!m_socket) {
    connect(deadline_from_now());
  }
}

namespace {

// Starts a non-blocking connect and waits for it within the deadline.
// Returns the connected socket, or an invalid one with `error` set.
util::UniqueFd connect_one(int family, const sockaddr* address, socklen_t length, Micros deadline,
                           std::string& error, bool& timed_out) {
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
  if (!wait_ready(fd.get(), POLLOUT, deadline)) {
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

}  // namespace

void Connection::connect(const Deadline& deadline, std::optional<HostPort> first) {
  if (!m_endpoint.locator) {
    connect_to(m_endpoint.host, m_endpoint.port, deadline, false);
    return;
  }
  // The Sentinel client protocol: ask where the master is, connect, and check
  // ROLE there: a Sentinel that has not seen a failover yet may name a server
  // that is a replica now. Then ask again (another Sentinel first).
  Locator& locator = *m_endpoint.locator;
  std::string refused;
  for (int attempt = 0; attempt < k_locate_attempts; ++attempt) {
    const HostPort address = attempt == 0 && first ? *first : locator.locate(m_cap);
    const std::string where =
        locator.describe() + " at " + address.host + ":" + std::to_string(address.port);
    std::string role;
    try {
      role = connect_to(address.host, address.port, deadline_from_now(), true);
    } catch (const Error& e) {
      close();
      throw Error(e.kind(), e.subject(), where + ": " + e.reason());
    }
    if (role == "master") {
      if (util::tracing()) {
        util::trace("redis: connected to " + where);
      }
      m_located = address;
      m_located_for = m_cap;
      m_suspect = false;
      return;
    }
    close();
    locator.wrong_role(address, role);
    refused = where + " says it is a " + (role.empty() ? "server of unknown role" : role);
    if (util::tracing()) {
      util::trace("redis: " + refused + "; asking again");
    }
  }
  throw Error(ErrorKind::unavailable, m_endpoint.name, refused + ", not the master");
}

void Connection::follow_master() {
  // A failover leaves the old master taking writes (its replicas gone, so a
  // WAIT there confirms nothing) until the Sentinels demote it, seconds later:
  // a connection to it does not break, so the renewal must ask.
  const bool thorough = m_suspect;
  m_suspect = false;
  m_located_for = m_cap;
  // Half of what is left before the lock could expire, at most: a Sentinel
  // that hangs must not take the time the renewal itself needs.
  const util::Micros now = util::mono_now();
  const util::Micros ask_until = now + (*m_cap - now) / 2;
  std::optional<HostPort> moved;
  try {
    moved = m_endpoint.locator->recheck(*m_located, ask_until, thorough);
  } catch (const Error& e) {
    // No Sentinel answers: the server we have may well still be the master.
    if (util::tracing()) {
      util::trace("redis: asking where the master is: " + e.reason() + "; staying");
    }
    return;
  }
  if (!moved) {
    return;
  }
  if (util::tracing()) {
    util::trace("redis: " + m_endpoint.locator->describe() + " moved to " + moved->host + ":" +
                std::to_string(moved->port) + "; reconnecting");
  }
  close();
  connect(deadline_from_now(), moved);
}

void Connection::note_demotion(const std::vector<Command>& commands,
                               const std::vector<Reply>& replies) {
  for (std::size_t i = 0; i < replies.size() && i < commands.size() && !m_suspect; ++i) {
    if (says_demoted(commands[i], *replies[i])) {
      m_suspect = true;
      if (util::tracing()) {
        util::trace("redis: " + describe_reply(*replies[i]) +
                    ": the master may have moved; asking before the next command");
      }
    }
  }
}

std::string Connection::connect_to(const std::string& host, int port, const Deadline& deadline,
                                   bool check_role) {
  close();
  auto socket = std::make_unique<Socket>();
  std::string error;
  bool timed_out = false;
  if (!m_endpoint.unix_path.empty()) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (m_endpoint.unix_path.size() >= sizeof address.sun_path) {
      throw Error(ErrorKind::usage, m_endpoint.name, "the socket path is too long");
    }
    std::memcpy(address.sun_path, m_endpoint.unix_path.c_str(), m_endpoint.unix_path.size() + 1);
    socket->fd = connect_one(AF_UNIX, reinterpret_cast<const sockaddr*>(&address), sizeof address,
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
      throw Error(ErrorKind::unavailable, m_endpoint.name,
                  "cannot resolve '" + util::escape(host) + "': " + gai_strerror(status));
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
    for (const addrinfo* a = found; a != nullptr && !socket->fd && !timed_out; a = a->ai_next) {
      socket->fd =
          connect_one(a->ai_family, a->ai_addr, a->ai_addrlen, deadline.at, error, timed_out);
    }
    if (socket->fd) {
      // Requests are written whole; Nagle would only delay them.
      const int one = 1;
      setsockopt(socket->fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  }
  if (!socket->fd) {
    throw Error(ErrorKind::unavailable, m_endpoint.name,
                timed_out ? deadline.passed() : (error.empty() ? "cannot connect" : error));
  }

  if (m_endpoint.tls) {
    socket->tls = std::make_unique<TlsSession>(m_endpoint.tls, socket->fd.get(), host);
    for (;;) {
      const IoResult step = socket->tls->handshake();
      if (step.status == IoStatus::done) {
        break;
      }
      if (step.status == IoStatus::want_read || step.status == IoStatus::want_write) {
        if (!wait_ready(socket->fd.get(), step.status == IoStatus::want_read ? POLLIN : POLLOUT,
                        deadline.at)) {
          throw Error(ErrorKind::unavailable, m_endpoint.name,
                      "TLS handshake " + deadline.passed());
        }
        continue;
      }
      throw Error(step.kind, m_endpoint.name,
                  step.status == IoStatus::closed
                      ? "the server closed the connection during the TLS handshake"
                      : step.error);
    }
  }
  socket->reader.reset(create_reader());
  if (!socket->reader) {
    throw Error(ErrorKind::internal, m_endpoint.name, "out of memory");
  }
  m_socket = std::move(socket);

  m_checks_pending = false;
  if (m_setup.empty() && !check_role) {
    // Nothing to ride with: the checks go with the first exchange (exchange()),
    // not in a round trip of their own at every connect.
    m_checks_pending = !m_checks.empty();
    return "";
  }
  // AUTH, SELECT (or SUBSCRIBE), ROLE in one round trip: start-up time is most
  // of what an nxlock invocation costs. Within the connect's own deadline.
  // ROLE goes before SUBSCRIBE, after which a connection takes no commands.
  std::vector<Command> commands;
  std::size_t role_index = SIZE_MAX;
  for (const auto& args : m_setup) {
    if (check_role && role_index == SIZE_MAX && !args.empty() && args.front() == "SUBSCRIBE") {
      role_index = commands.size();
      commands.push_back({{"ROLE"}, {}});
    }
    Command command;
    command.args.assign(args.begin(), args.end());
    commands.push_back(std::move(command));
  }
  if (check_role && role_index == SIZE_MAX) {
    role_index = commands.size();
    commands.push_back({{"ROLE"}, {}});
  }
  const std::size_t checks_from = commands.size();
  for (const auto& [args, check] : m_checks) {
    Command command;
    command.args.assign(args.begin(), args.end());
    commands.push_back(std::move(command));
  }
  const auto replies = run(commands, deadline, true);
  for (std::size_t i = 0; i < checks_from; ++i) {
    if (replies[i]->type == REDIS_REPLY_ERROR) {
      close();
      throw_reply_error(*replies[i], commands[i], m_endpoint.name);
    }
  }
  try {
    for (std::size_t i = checks_from; i < replies.size(); ++i) {
      m_checks[i - checks_from].second(*replies[i]);
    }
  } catch (...) {
    close();
    throw;
  }
  if (role_index == SIZE_MAX) {
    return "";
  }
  // ROLE answers an array whose first element is "master", "slave" or "sentinel".
  const redisReply& role = *replies[role_index];
  if (role.type == REDIS_REPLY_ARRAY && role.elements > 0 &&
      role.element[0]->type == REDIS_REPLY_STRING) {
    return std::string(role.element[0]->str, role.element[0]->len);
  }
  return "";
}

bool Connection::idle_connection_alive() {
  pollfd entry{m_socket->fd.get(), POLLIN, 0};
  if (poll(&entry, 1, 0) <= 0) {
    return true;  // nothing to read: as alive as a socket can be known to be
  }
  if ((entry.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
    return false;
  }
  char byte = 0;
  if (m_socket->tls) {
    // TLS 1.3 servers send session tickets after the handshake: records that
    // make the socket readable but hold no reply. Reading consumes them.
    const IoResult result = m_socket->tls->read(&byte, 1);
    return result.status == IoStatus::want_read;
  }
  // EOF (an idle-client timeout, a restart) or unexpected bytes (a reply we
  // stopped waiting for): either way this connection is of no more use.
  const ssize_t n = recv(m_socket->fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void Connection::send_all(const std::string& bytes, const Deadline& deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const IoResult result = m_socket->write(bytes.data() + sent, bytes.size() - sent);
    switch (result.status) {
      case IoStatus::done:
        sent += result.bytes;
        break;
      case IoStatus::want_read:
      case IoStatus::want_write:
        // TLS retries the write with the same bytes once the socket is ready.
        if (!wait_ready(m_socket->fd.get(), result.status == IoStatus::want_read ? POLLIN : POLLOUT,
                        deadline.at)) {
          fail(ErrorKind::unavailable, deadline.passed());
        }
        break;
      case IoStatus::closed:
      case IoStatus::failed:
        fail_closed(result);
    }
  }
}

Reply Connection::parsed_reply() {
  void* raw = nullptr;
  if (redisReaderGetReply(m_socket->reader.get(), &raw) != REDIS_OK) {
    fail(ErrorKind::unavailable, std::string("protocol error: ") + m_socket->reader->errstr);
  }
  return Reply(static_cast<redisReply*>(raw));
}

IoStatus Connection::read_more() {
  char buffer[k_read_chunk];
  const IoResult result = m_socket->read(buffer, sizeof buffer);
  switch (result.status) {
    case IoStatus::done:
      if (redisReaderFeed(m_socket->reader.get(), buffer, result.bytes) != REDIS_OK) {
        fail(ErrorKind::internal, "out of memory");
      }
      break;
    case IoStatus::want_read:
    case IoStatus::want_write:
      break;
    case IoStatus::closed:
    case IoStatus::failed:
      fail_closed(result);
  }
  return result.status;
}

Reply Connection::read_reply(const Deadline& deadline) {
  for (;;) {
    if (Reply reply = parsed_reply()) {
      return reply;
    }
    // OpenSSL may already hold decrypted bytes that poll cannot see.
    if (!tls_pending() && !wait_ready(m_socket->fd.get(), POLLIN, deadline.at)) {
      fail(ErrorKind::unavailable, deadline.passed());
    }
    // want_read: a TLS record not complete yet, or a spurious wake-up.
    if (read_more() == IoStatus::want_write &&
        !wait_ready(m_socket->fd.get(), POLLOUT, deadline.at)) {
      fail(ErrorKind::unavailable, deadline.passed());
    }
    if (util::mono_now() >= deadline.at) {
      // A server trickling its reply keeps the socket readable: the deadline
      // is for the whole exchange, checked after every read. A reply complete
      // only now is late too: no decision may rest on it.
      fail(ErrorKind::unavailable, deadline.passed());
    }
  }
}

std::vector<Reply> Connection::run(const std::vector<Command>& commands, const Deadline& deadline,
                                   bool trace) {
  std::string request;
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& command : commands) {
    argv.clear();
    lengths.clear();
    for (const auto arg : command.args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    char* formatted = nullptr;
    // Explicit lengths: keys and values may contain NUL or any other byte.
    const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()),
                                              argv.data(), lengths.data());
    if (length < 0 || formatted == nullptr) {
      throw Error(ErrorKind::internal, m_endpoint.name, "out of memory");
    }
    request.append(formatted, static_cast<std::size_t>(length));
    redisFreeCommand(formatted);
  }

  std::vector<Reply> replies;
  const bool tracing = trace && util::tracing();
  try {
    send_all(request, deadline);
    for (const auto& command : commands) {
      replies.push_back(read_reply(deadline));
      if (tracing) {
        trace_command(command, replies.back().get(), {});
      }
    }
  } catch (const Error& e) {
    if (tracing && replies.size() < commands.size()) {
      trace_command(commands[replies.size()], nullptr, e.reason());
    }
    throw;
  }
  return replies;
}

std::vector<Reply> Connection::exchange(const std::vector<Command>& commands) {
  // Past the cap already: a command sent now (a renewal) could take effect
  // with no reply to say so. Nothing is sent, and the connection stays.
  if (m_cap && util::mono_now() >= *m_cap) {
    throw Error(ErrorKind::unavailable, m_endpoint.name, deadline_from_now().passed());
  }
  if (m_endpoint.locator && m_socket && m_located && m_cap &&
      (m_suspect || m_located_for != m_cap)) {
    follow_master();
  }
  ensure_connected();
  const Deadline deadline = deadline_from_now();
  if (util::mono_now() >= deadline.at) {
    throw Error(ErrorKind::unavailable, m_endpoint.name, deadline.passed());
  }
  m_socket->fresh = false;
  auto replies = m_checks_pending ? run_checked(commands, deadline) : run(commands, deadline, false);
  if (m_endpoint.locator) {
    note_demotion(commands, replies);
  }
  return replies;
}

std::vector<Reply> Connection::run_checked(const std::vector<Command>& commands,
                                           const Deadline& deadline) {
  // A write must not reach a server the checks would refuse: only reads ride
  // along with them.
  const bool reads_only = std::all_of(commands.begin(), commands.end(), [](const Command& c) {
    return !c.args.empty() && (c.args.front() == "TIME" || c.args.front() == "GET");
  });
  std::vector<Command> pipeline;
  for (const auto& [args, check] : m_checks) {
    pipeline.push_back({{args.begin(), args.end()}, {}});
  }
  const std::size_t checks = pipeline.size();
  if (reads_only) {
    pipeline.insert(pipeline.end(), commands.begin(), commands.end());
  }
  auto replies = run(pipeline, deadline, false);
  try {
    for (std::size_t i = 0; i < checks; ++i) {
      m_checks[i].second(*replies[i]);
    }
  } catch (...) {
    close();
    throw;
  }
  m_checks_pending = false;
  if (!reads_only) {
    return run(commands, deadline, false);
  }
  replies.erase(replies.begin(), replies.begin() + static_cast<std::ptrdiff_t>(checks));
  return replies;
}

bool Connection::take_messages(const std::function<bool(const redisReply&)>& wanted) {
  if (!m_socket) {
    return false;
  }
  bool any = false;
  for (;;) {
    if (const Reply reply = parsed_reply()) {
      if (util::tracing()) {
        util::trace("redis: (subscriber) ← " + describe_reply(*reply));
      }
      any = any || !wanted || wanted(*reply);
    } else if (read_more() != IoStatus::done) {
      return any;  // nothing more without waiting
    }
  }
}

}  // namespace nxlock::store::redis
