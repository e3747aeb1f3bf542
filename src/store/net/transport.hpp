// Transport: how bytes cross a connected socket, plain (here) or TLS (tls.hpp), one interface.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/error.hpp"
#include "util/time.hpp"

namespace nxlock::store::net {

// The outcome of one non-blocking step: done, or which way to poll.
enum class IoStatus { done, want_read, want_write, closed, failed };

struct IoResult {
  IoStatus status = IoStatus::failed;
  std::size_t bytes = 0;  // read or written, when done
  // When failed: why, and whether it is the user's trust setup (77) or the
  // peer (69).
  std::string error;
  util::ErrorKind kind = util::ErrorKind::unavailable;
};

// Reads and writes on a connected, non-blocking socket that the caller owns
// (hiredis's read/write function pointers, as a class).
class Transport {
 public:
  virtual ~Transport() = default;

  virtual IoResult read(char* buffer, std::size_t size) = 0;
  // After want_read/want_write, call again with the same bytes and length.
  virtual IoResult write(const char* buffer, std::size_t size) = 0;
  // Bytes taken off the socket but not yet handed out: poll would not see them.
  virtual bool pending() const = 0;
  // The socket of a connection idle since its last reply turned readable:
  // true if what came is nothing for us (TLS session tickets), false if the
  // connection is of no more use (EOF, or a reply we stopped waiting for).
  virtual bool idle_alive() = 0;
  // Why a step ended `closed` or `failed`: the peer may have said (a TLS
  // alert); else `result` itself.
  virtual IoResult explain(const IoResult& result) { return result; }
};

// The plain socket transport: recv and send.
std::unique_ptr<Transport> make_plain_transport(int fd);

// Waits until `fd` can go on after `want` (want_read: readable, else
// writable), or `deadline` (monotonic) passes: false.
bool wait_ready(int fd, IoStatus want, util::Micros deadline);

// Writes all of `bytes` through `transport` on `fd`, waiting as it asks, until
// `deadline` (monotonic): nullopt once written; else why not, explained
// (closed, failed), or want_read/want_write when the deadline passed first.
std::optional<IoResult> write_all(Transport& transport, int fd, std::string_view bytes,
                                  util::Micros deadline);

// strerror's words for `error`, as the tail of a message: "connection refused".
std::string errno_text(int error);

}  // namespace nxlock::store::net
