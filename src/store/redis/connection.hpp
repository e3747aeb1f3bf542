// Connection: one Redis socket (TCP, unix or TLS) with one deadline per connect and per exchange.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/net/deadline.hpp"
#include "store/net/endpoint.hpp"
#include "store/net/transport.hpp"
#include "store/redis/reply.hpp"
#include "store/redis/setup.hpp"
#include "store/url.hpp"
#include "util/error.hpp"
#include "util/time.hpp"

namespace nxlock::store::redis {

class Connection {
 public:
  // `setup` runs after every connect, in one round trip (AUTH, SELECT, SUBSCRIBE).
  // Connects lazily: nothing happens until the first exchange().
  Connection(net::Endpoint endpoint, std::vector<std::vector<std::string>> setup);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `commands` in one write and returns their replies in order, error
  // replies included (mapped by throw_reply_error by the caller). Connects
  // first if there is no connection, or if the idle one was closed by the
  // server: one connect attempt, bounded by its own deadline. Every deadline
  // is min(now + timeout, the cap). Throws util::Error (unavailable) for a
  // refused connect, a lost connection or a passed deadline, after which the
  // connection is closed: a late reply would put the stream out of step.
  std::vector<Reply> exchange(const std::vector<Command>& commands);

  // Also runs `command` in the setup's round trip after every connect, and
  // hands its reply, an error reply included (an ACL may refuse INFO), to
  // `check`, which may throw: the connect then fails with that error. With no
  // setup to ride with, the checks go with the first exchange instead, when it
  // only reads (TIME, GET), or in a round trip of their own just before a write.
  using SetupCheck = redis::SetupCheck;
  void add_setup_check(std::vector<std::string> command, SetupCheck check) {
    m_checks.emplace_back(std::move(command), std::move(check));
  }

  // Caps every later deadline at this monotonic instant (nullopt: no cap).
  void set_cap(std::optional<util::Micros> cap) { m_cap = cap; }

  // Connects (and runs the setup) now if not connected. Throws as exchange().
  void ensure_connected();

  bool connected() const;
  int fd() const;  // -1 when not connected
  // True when bytes wait that poll on fd() would not report: in the reply
  // reader, or decrypted by OpenSSL.
  bool buffered() const;
  // Subscriber side: reads what the socket has without waiting and consumes
  // every complete message (pub/sub pushes). True if there was at least one
  // that `wanted` accepts (every one, without it). Throws (closing the
  // connection) when the server went away.
  bool take_messages(const std::function<bool(const redisReply&)>& wanted = {});
  // Closes the connection; the next exchange() reconnects.
  void close();

  const net::Endpoint& endpoint() const { return m_endpoint; }

 private:
  struct Socket;

  net::Deadline deadline_from_now() const;

  // connection_locate.cpp: the server an endpoint's Locator names.
  // `first`: the address to try first instead of asking the locator.
  void connect(const net::Deadline& deadline, std::optional<HostPort> first = std::nullopt);
  // A located server, between commands that serve a lock (a cap is set): asks
  // the locator again once per cap (once per renewal), and at once after a
  // reply that says the server may no longer be the master; moves if it did.
  void follow_master();
  // Marks the server suspect after READONLY or a WAIT short of its replicas.
  void note_demotion(const std::vector<Command>& commands, const std::vector<Reply>& replies);

  // Connects to host:port and runs the setup; returns ROLE's first word when
  // `check_role`, else "".
  std::string connect_to(const std::string& host, int port, const net::Deadline& deadline,
                         bool check_role);
  // Sends `commands` and reads their replies; `trace`: each as a trace line.
  std::vector<Reply> run(const std::vector<Command>& commands, const net::Deadline& deadline,
                         bool trace);
  // Runs the checks ahead of `commands` in one round trip; their replies are
  // checked (closing the connection if one throws), the others returned.
  std::vector<Reply> run_checked(const std::vector<Command>& commands,
                                 const net::Deadline& deadline);
  void send_all(const std::string& bytes, const net::Deadline& deadline);
  // The next complete reply in the reader, or null if it needs more bytes.
  Reply parsed_reply();
  // Feeds the reader what the socket has now: done, or want_read/want_write
  // when nothing could be read yet. Fails (closing) when the server went away.
  net::IoStatus read_more();
  Reply read_reply(const net::Deadline& deadline);
  // Fails (closing) with the passed deadline unless the socket is ready for `want` before it.
  void wait_or_fail(net::IoStatus want, const net::Deadline& deadline);
  bool idle_connection_alive();
  [[noreturn]] void fail(util::ErrorKind kind, const std::string& reason);
  // Fails for a connection the server closed or broke (closed or failed I/O).
  [[noreturn]] void fail_closed(const net::IoResult& result);

  net::Endpoint m_endpoint;
  std::vector<std::vector<std::string>> m_setup;
  SetupChecks m_checks;
  // The checks of this connection have not run yet (see add_setup_check).
  bool m_checks_pending = false;
  std::optional<util::Micros> m_cap;
  std::unique_ptr<Socket> m_socket;
  // With a locator: where the connected master is, the cap under which it was
  // last located, and whether a reply since says it may have been demoted.
  std::optional<HostPort> m_located;
  std::optional<util::Micros> m_located_for;
  bool m_suspect = false;
};

}  // namespace nxlock::store::redis
