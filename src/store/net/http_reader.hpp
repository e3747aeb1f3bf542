// HttpReader: the narrow HTTP/1.1 response reader of etcd's JSON gateway and --ping's pings.
//
// Ours rather than libhttp-parser's: etcd's gateway (Go's net/http) answers
// with a status line, headers, and a body framed by Content-Length (unary
// calls) or chunked (the watch and keepalive streams); that is all we read,
// fed from the same non-blocking loop as the Redis replies, with no shared
// object to load at start-up, and fuzzed (fuzz/fuzz_http.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nxlock::store::net {

class HttpReader {
 public:
  // Bounds on what a server may send before we call it broken.
  static constexpr std::size_t k_max_head = 64 * 1024;
  static constexpr std::size_t k_max_body = 256 * 1024 * 1024;

  // Takes the next bytes from the socket. Never throws: a malformed response
  // sets failed() and error(), after which nothing more is read.
  void feed(std::string_view bytes);
  // The server closed the connection: the end of a body framed by nothing
  // else, or a response cut short (failed()).
  void end_of_stream();

  // The status line and headers are in.
  bool head_done() const { return m_state > State::head; }
  int status() const { return m_status; }
  // Once the head is in: its status line ("HTTP/1.1 200 OK"; empty before, or
  // if it was malformed) and its Server header (empty if none), raw bytes cut
  // at k_quoted bytes, to say what answered.
  const std::string& status_line() const { return m_status_line; }
  const std::string& server() const { return m_server; }
  static constexpr std::size_t k_quoted = 80;
  // The whole response is in (its Content-Length, or its last chunk).
  bool complete() const { return m_state == State::done; }
  bool failed() const { return m_state == State::failed; }
  const std::string& error() const { return m_error; }
  // The server will close the connection after this response.
  bool closes() const { return m_closes; }

  // The body bytes decoded so far and not yet taken (chunk framing removed).
  std::string take_body();
  const std::string& body() const { return m_body; }

  // Bytes fed after the end of this response (the next one's), handed back.
  std::string take_rest();

 private:
  enum class State {
    head,
    length_body,
    until_close,
    chunk_size,
    chunk_data,
    chunk_data_end,
    trailer,
    done,
    failed
  };

  void fail(std::string why);
  void parse_head(std::string_view head);
  // Consumes what it can of m_buffer; false when it needs more bytes.
  bool step();

  State m_state = State::head;
  std::string m_buffer;  // bytes fed and not yet consumed
  std::string m_body;
  std::string m_error;
  std::string m_status_line;
  std::string m_server;
  int m_status = 0;
  bool m_closes = false;
  bool m_chunked = false;
  std::uint64_t m_left = 0;  // of the Content-Length body, or of the current chunk
};

}  // namespace nxlock::store::net
