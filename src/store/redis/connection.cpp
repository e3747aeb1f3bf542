// Connection: the command funnel; requests by redisFormatCommandArgv, replies by redisReader, each
// exchange by its deadline, over whichever transport connect gave.
#include "store/redis/connection.hpp"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>

#include "store/net/connect.hpp"
#include "store/protocol_probe.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/poll.hpp"
#include "util/redact.hpp"
#include "util/trace.hpp"

namespace nxlock::store::redis {

namespace {

using net::Deadline;
using net::IoResult;
using net::IoStatus;
using util::Error;
using util::ErrorKind;
using util::Micros;

constexpr std::size_t k_read_chunk = 16 * 1024;
// The bytes of a reply kept to quote, should they not be RESP (parsed_reply).
constexpr std::size_t k_first_bytes_kept = 80;

struct ReaderDeleter {
  void operator()(redisReader* reader) const { redisReaderFree(reader); }
};

// The scripts are long and say nothing in a trace line.
std::string argument_text(const Command& command, std::size_t i) {
  const std::string_view name = command.args.front();
  if (i > 0 && (name == "AUTH" || name == "auth")) {
    return std::string(util::k_redacted);  // AUTH's arguments: never in a trace
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

}  // namespace

// The connected socket, the transport over it, and the reply parser.
struct Connection::Socket {
  util::UniqueFd fd;
  std::unique_ptr<net::Transport> transport;
  std::unique_ptr<redisReader, ReaderDeleter> reader;
  // Nothing but the setup has run on it yet: just connected, it needs no
  // check for having been closed while idle (one syscall less per invocation).
  bool fresh = true;
  // The first bytes the server sent, to quote when they are not RESP: the
  // reader empties its buffer on a protocol error.
  std::string first_bytes;
  // Where it is connected: asked again should it close before a word (fail_closed).
  std::string host;
  int port = 0;
};

Connection::Connection(net::Endpoint endpoint, std::vector<std::vector<std::string>> setup)
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

bool Connection::buffered() const {
  // The reader may hold bytes that came with an earlier reply (a message
  // published right after SUBSCRIBE's confirmation): the socket will not turn
  // readable for them.
  return m_socket &&
         (m_socket->transport->pending() || m_socket->reader->pos < m_socket->reader->len);
}

Deadline Connection::deadline_from_now() const {
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
  const IoResult why = m_socket ? m_socket->transport->explain(result) : result;
  if (m_socket && m_socket->first_bytes.empty() && why.kind == ErrorKind::unavailable) {
    // Closed before a word: etcd (or another HTTP server) closes on RESP.
    const auto socket = std::move(m_socket);
    if (const auto http = http_instead_of_redis(m_endpoint, socket->host, socket->port,
                                                deadline_from_now())) {
      fail(ErrorKind::unavailable, *http);
    }
  }
  if (why.status == IoStatus::closed) {
    fail(ErrorKind::unavailable, "server closed the connection");
  }
  fail(why.kind, why.error);
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

std::string Connection::connect_to(const std::string& host, int port, const Deadline& deadline,
                                   bool check_role) {
  close();
  net::OpenSocket opened = net::open_socket(m_endpoint, host, port, deadline);
  auto socket = std::make_unique<Socket>();
  socket->fd = std::move(opened.fd);
  socket->transport = std::move(opened.transport);
  socket->host = host;
  socket->port = port;
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
  // Within the connect's own deadline.
  const SetupPipeline pipeline = setup_pipeline(m_setup, m_checks, check_role);
  const auto replies = run(pipeline.commands, deadline, true);
  try {
    return judge_setup(pipeline, replies, m_checks, m_endpoint.name);
  } catch (...) {
    close();
    throw;
  }
}

bool Connection::idle_connection_alive() {
  pollfd entry{m_socket->fd.get(), POLLIN, 0};
  if (util::poll_until(&entry, 1, Micros(0)) == 0) {
    return true;  // nothing to read: as alive as a socket can be known to be
  }
  if ((entry.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
    return false;
  }
  return m_socket->transport->idle_alive();
}

void Connection::wait_or_fail(IoStatus want, const Deadline& deadline) {
  if (!net::wait_ready(m_socket->fd.get(), want, deadline.at)) {
    fail(ErrorKind::unavailable, deadline.passed());
  }
}

void Connection::send_all(const std::string& bytes, const Deadline& deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const IoResult result = m_socket->transport->write(bytes.data() + sent, bytes.size() - sent);
    switch (result.status) {
      case IoStatus::done:
        sent += result.bytes;
        break;
      case IoStatus::want_read:
      case IoStatus::want_write:
        // TLS retries the write with the same bytes once the socket is ready.
        wait_or_fail(result.status, deadline);
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
    // A reply that does not even start as RESP does: another service (an
    // HTTP server) listens there. Its first line says which.
    const std::string& first = m_socket->first_bytes;
    if (!first.empty() && std::string_view("+-:$*_,#!=(%~>|").find(first[0]) == std::string::npos) {
      fail(ErrorKind::unavailable,
           "not a Redis server (it answered `" +
               util::escape(std::string_view(first).substr(0, first.find_first_of("\r\n")), 60) +
               "`)");
    }
    fail(ErrorKind::unavailable, std::string("protocol error: ") + m_socket->reader->errstr);
  }
  return Reply(static_cast<redisReply*>(raw));
}

IoStatus Connection::read_more() {
  char buffer[k_read_chunk];
  const IoResult result = m_socket->transport->read(buffer, sizeof buffer);
  switch (result.status) {
    case IoStatus::done:
      if (m_socket->first_bytes.size() < k_first_bytes_kept) {
        m_socket->first_bytes.append(
            buffer, std::min(result.bytes, k_first_bytes_kept - m_socket->first_bytes.size()));
      }
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
    // The transport may already hold bytes (decrypted by OpenSSL) that poll cannot see.
    if (!m_socket->transport->pending()) {
      wait_or_fail(IoStatus::want_read, deadline);
    }
    // want_read: a TLS record not complete yet, or a spurious wake-up.
    if (read_more() == IoStatus::want_write) {
      wait_or_fail(IoStatus::want_write, deadline);
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
  auto replies =
      m_checks_pending ? run_checked(commands, deadline) : run(commands, deadline, false);
  if (m_endpoint.locator) {
    note_demotion(commands, replies);
  }
  return replies;
}

std::vector<Reply> Connection::run_checked(const std::vector<Command>& commands,
                                           const Deadline& deadline) {
  const bool ride_along = reads_only(commands);
  std::vector<Command> pipeline = check_commands(m_checks);
  const std::size_t checks = pipeline.size();
  if (ride_along) {
    pipeline.insert(pipeline.end(), commands.begin(), commands.end());
  }
  auto replies = run(pipeline, deadline, false);
  try {
    run_checks(m_checks, replies);
  } catch (...) {
    close();
    throw;
  }
  m_checks_pending = false;
  if (!ride_along) {
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
