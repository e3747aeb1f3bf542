// libFuzzer target: bytes as a server could send them, read by hiredis's redisReader, then nxlock's
// reply mapping.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "store/redis/connection.hpp"
#include "store/redis/reply.hpp"
#include "util/error.hpp"

namespace {

using nxlock::store::redis::Command;
using nxlock::util::Error;
using nxlock::util::ErrorKind;

// Every message and trace is one line, whatever the server sent.
void check_one_line(const std::string& text) {
  if (text.find_first_of("\r\n") != std::string::npos) {
    std::abort();
  }
}

void map(const redisReply& reply) {
  check_one_line(nxlock::store::redis::describe_reply(reply));
  const auto redirect = nxlock::store::redis::parse_redirect(reply);
  if (redirect) {
    // A redirect is only ever followed to a real slot and a port a socket can take.
    if (reply.type != REDIS_REPLY_ERROR || redirect->slot < 0 || redirect->slot >= 16384 ||
        redirect->address.port <= 0 || redirect->address.port > 65535) {
      std::abort();
    }
  }
  if (reply.type == REDIS_REPLY_ERROR) {
    try {
      nxlock::store::redis::throw_reply_error(reply, Command{{"GET", "k"}, "k"}, "redis://h");
    } catch (const Error& error) {
      // A server's error is never a bug in nxlock (70), nor a usage error (64).
      if (error.kind() == ErrorKind::internal || error.kind() == ErrorKind::usage) {
        std::abort();
      }
      check_one_line(error.what());
    }
  }
  // The value readers: a value, or an "unexpected reply" (70) naming it on one line.
  const auto expect_unexpected = [](const Error& error) {
    if (error.kind() != ErrorKind::internal) {
      std::abort();
    }
    check_one_line(error.what());
  };
  try {
    (void)nxlock::store::redis::integer_of(reply, "n");
  } catch (const Error& error) {
    expect_unexpected(error);
  }
  try {
    (void)nxlock::store::redis::string_of(reply, "n");
  } catch (const Error& error) {
    expect_unexpected(error);
  }
  try {
    (void)nxlock::store::redis::time_of(reply, "n");
  } catch (const Error& error) {
    expect_unexpected(error);
  }
}

struct ReaderDeleter {
  void operator()(redisReader* reader) const { redisReaderFree(reader); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::unique_ptr<redisReader, ReaderDeleter> reader(nxlock::store::redis::create_reader());
  if (redisReaderFeed(reader.get(), reinterpret_cast<const char*>(data), size) != REDIS_OK) {
    return 0;
  }
  // Every complete reply in the bytes, as a pipelined exchange reads them.
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) {
      return 0;  // a protocol error (the connection is dropped, 69) or an incomplete reply
    }
    const nxlock::store::redis::Reply reply(static_cast<redisReply*>(raw));
    map(*reply);
  }
}
