// HttpConnection: one HTTP/1.1 connection to one etcd member over store/net's sockets and TLS.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/net/connect.hpp"
#include "store/net/deadline.hpp"
#include "store/net/endpoint.hpp"
#include "store/net/http_reader.hpp"
#include "store/url.hpp"

namespace nxlock::store::etcd {

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string status_line;  // raw, cut: see HttpReader::status_line()
  std::string server;       // the Server header, raw, cut; empty if none
};

// "host:port", "[::1]:2379": a member as messages name it.
std::string member_address(const HostPort& member);

// What answered, for a message about a server that is not etcd:
// "`HTTP/1.0 200 OK` from `BaseHTTP/0.6 Python/3.11.2`".
std::string what_answered(const HttpResponse& response);

// The bytes of a POST of `body` (JSON) to `path` on `host`, with the extra header
// lines `headers` (each ending in \r\n).
std::string format_post(const HostPort& host, std::string_view path, std::string_view body,
                        std::string_view headers);

class HttpConnection {
 public:
  // `endpoint` says how to connect (TLS, the name for messages); `member` where.
  HttpConnection(const net::Endpoint& endpoint, HostPort member);

  // Sends `request` and reads its response. Connects first if not connected
  // (or if the server closed the idle connection). Throws util::Error
  // (unavailable) naming the member if it cannot, or the deadline passes;
  // the connection is closed then.
  HttpResponse exchange(const std::string& request, const net::Deadline& deadline);

  // Sends `request` without reading its response; the next exchange() reads
  // it first and drops it. For a write whose answer nobody waits for.
  void send_only(const std::string& request, const net::Deadline& deadline);

  // Sends every request in `requests` (bytes of one or more requests) and
  // reads `count` responses. Throws as exchange().
  std::vector<HttpResponse> exchange_many(const std::string& requests, std::size_t count,
                                          const net::Deadline& deadline);

  // Reads the answers of send_only() that are still unread, by `deadline`
  // (a request whose client goes away may be canceled unapplied). Never throws.
  void drain(const net::Deadline& deadline);

  // Streams: sends `request` (connecting first); its response is read with
  // read_available() as it comes.
  void open_stream(const std::string& request, const net::Deadline& deadline);
  // Reads what the socket has now, without waiting, into the stream's reader.
  // False when the stream is over (closed, or a malformed response).
  bool read_available();
  net::HttpReader& reader() { return m_reader; }

  int fd() const;
  bool connected() const { return static_cast<bool>(m_socket.fd); }
  void close();
  const HostPort& member() const { return m_member; }
  // "etcd://a:2379,b:2379 (member b:2379)"
  std::string describe() const;

 private:
  void ensure_connected(const net::Deadline& deadline);
  void send_all(const std::string& bytes, const net::Deadline& deadline);
  HttpResponse receive(const net::Deadline& deadline);
  // By value: `why` may be the reader's own message, which close() resets.
  [[noreturn]] void fail(std::string why);
  // fail(), for a connection closed or broken before it read a byte: if a
  // Redis server listens there (it closes on HTTP without a word), says so.
  [[noreturn]] void fail_unanswered(std::string why, const net::Deadline& deadline);

  net::Endpoint m_endpoint;
  HostPort m_member;
  net::OpenSocket m_socket;
  net::HttpReader m_reader;
  std::string m_rest;    // bytes read past the previous response
  int m_unread = 0;      // responses of send_only() not read yet
  std::size_t m_received = 0;  // bytes read since connecting
};

}  // namespace nxlock::store::etcd
