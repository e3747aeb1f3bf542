// Reply mapping: bytes as a server sends them, read by hiredis, mapped to values, errors and
// redirects.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <string>

#include "store/redis/connection.hpp"
#include "store/redis/reply.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using store::redis::Command;
using store::redis::Reply;
using util::Error;
using util::ErrorKind;

// One reply from the bytes of the RESP protocol, as hiredis reads it off a socket.
Reply read(const std::string& bytes) {
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader(redisReaderCreate(), redisReaderFree);
  EXPECT_EQ(redisReaderFeed(reader.get(), bytes.data(), bytes.size()), REDIS_OK);
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader.get(), &reply), REDIS_OK);
  EXPECT_NE(reply, nullptr);
  return Reply(static_cast<redisReply*>(reply));
}

ErrorKind kind_of_error(const std::string& bytes, std::string* message = nullptr) {
  const auto reply = read(bytes);
  try {
    store::redis::throw_reply_error(*reply, Command{{"GET", "k"}, "k"}, "redis://h");
  } catch (const Error& e) {
    if (message) {
      *message = e.what();
    }
    return e.kind();
  }
  ADD_FAILURE() << "no error thrown";
  return ErrorKind::internal;
}

TEST(Reply, ErrorKindsOfTheContract) {
  std::string message;
  EXPECT_EQ(kind_of_error("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                          &message),
            ErrorKind::data);
  EXPECT_EQ(message,
            "redis://h key 'k': WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(kind_of_error("-ERR Error running script (call to f_x): @user_script:1: WRONGTYPE "
                          "Operation against a key holding the wrong kind of value\r\n"),
            ErrorKind::data);
  EXPECT_EQ(kind_of_error("-NOAUTH Authentication required.\r\n", &message), ErrorKind::permission);
  EXPECT_EQ(message,
            "redis://h: authentication required; give --password-file FILE or NXLOCK_PASSWORD");
  EXPECT_EQ(kind_of_error("-WRONGPASS invalid username-password pair or user is disabled.\r\n"),
            ErrorKind::permission);
  EXPECT_EQ(kind_of_error("-NOPERM this user has no permissions to run the 'eval' command\r\n"),
            ErrorKind::permission);
  EXPECT_EQ(kind_of_error("-READONLY You can't write against a read only replica.\r\n"),
            ErrorKind::unavailable);
  EXPECT_EQ(kind_of_error("-LOADING Redis is loading the dataset in memory\r\n", &message),
            ErrorKind::unavailable);
  EXPECT_EQ(message,
            "redis://h key 'k': server replied LOADING Redis is loading the dataset in "
            "memory");
  // A server's words never break the one-line message.
  kind_of_error("-ERR a\x1b[2Jb\r\n", &message);
  EXPECT_EQ(message, "redis://h key 'k': server replied ERR a\\x1b[2Jb");
}

// The code of an error reply, as a field: what callers compare instead of searching the words.
std::string code_of(const std::string& bytes) {
  const auto reply = read(bytes);
  const auto error = store::redis::error_of(*reply);
  EXPECT_TRUE(error) << bytes;
  return error ? std::string(error->code) : "(not an error)";
}

TEST(Reply, ErrorCodes) {
  EXPECT_EQ(code_of("-TRYAGAIN Multiple keys request during rehashing of slot\r\n"), "TRYAGAIN");
  EXPECT_EQ(code_of("-ERR unknown command 'EVAL', with args beginning with: \r\n"), "ERR");
  EXPECT_EQ(code_of("-MOVED 3999 127.0.0.1:6381\r\n"), "MOVED");
  EXPECT_EQ(code_of("-NOSCRIPT No matching script. Please use EVAL.\r\n"), "NOSCRIPT");
  EXPECT_EQ(code_of("-LOADING\r\n"), "LOADING");
  // No code word: the code is empty, and the words are still the message.
  EXPECT_EQ(code_of("-something went wrong\r\n"), "");
  EXPECT_EQ(code_of("-Err lowercase is no code\r\n"), "");
  EXPECT_EQ(code_of("-\r\n"), "");
  EXPECT_EQ(std::string(store::redis::error_of(*read("-oops TRYAGAIN\r\n"))->text),
            "oops TRYAGAIN");
  EXPECT_FALSE(store::redis::error_of(*read("+OK\r\n")));
  // Redis < 7 wraps an error raised inside a script: the wrapped error's code.
  EXPECT_EQ(code_of("-ERR Error running script (call to f_x): @user_script:1: WRONGTYPE "
                    "Operation against a key holding the wrong kind of value\r\n"),
            "WRONGTYPE");
  EXPECT_EQ(code_of("-ERR Error running script (call to f_x): @user_script:1: @user_script: 1: "
                    "-READONLY You can't write against a read only replica.\r\n"),
            "READONLY");
  // An ACL's refusal inside a script, worded under ERR before Redis 7.2 (7.0
  // below, 6 above): NOPERM, as 7.2 says.
  EXPECT_EQ(code_of("-ERR The user executing the script can't run this command or subcommand "
                    "script: 51ca04bb, on @user_script:1.\r\n"),
            "NOPERM");
  EXPECT_EQ(code_of("-ERR Error running script (call to f_x): @user_script:1: @user_script: 1: "
                    "The user executing the script can't run this command or subcommand\r\n"),
            "NOPERM");
}

TEST(Reply, ThrownErrorsCarryTheCode) {
  const auto code_thrown = [](const std::string& bytes) -> std::string {
    try {
      store::redis::throw_reply_error(*read(bytes), Command{{"EVAL", "s", "1", "k"}, "k"},
                                      "redis://h");
    } catch (const Error& e) {
      return std::string(store::redis::error_code(e));
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(code_thrown("-TRYAGAIN Multiple keys request during rehashing of slot\r\n"),
            "TRYAGAIN");
  EXPECT_EQ(code_thrown("-NOPERM this user has no permissions to run the 'zadd' command\r\n"),
            "NOPERM");
  EXPECT_EQ(code_thrown("-ERR a\r\n"), "ERR");
  // An error of nxlock's own carries none.
  EXPECT_EQ(store::redis::error_code(Error(ErrorKind::permission, "x", "NOPERM")), "");
  // The ACL refusal inside a script is the server's NOPERM on every version:
  // 77, as on Redis 7.2 (Redis 7.0's wording was 69 before).
  EXPECT_EQ(kind_of_error("-ERR The user executing the script can't run this command or "
                          "subcommand script: 51ca04bb, on @user_script:1.\r\n"),
            ErrorKind::permission);
}

TEST(Reply, Values) {
  using namespace std::string_literals;
  EXPECT_EQ(store::redis::integer_of(*read(":1\r\n"), "n"), 1);
  EXPECT_EQ(store::redis::string_of(*read("$5\r\nhe\0lo\r\n"s), "n"), "he\0lo"s);
  EXPECT_EQ(store::redis::string_of(*read("$-1\r\n"), "n"), std::nullopt);
  EXPECT_EQ(store::redis::time_of(*read("*2\r\n$10\r\n1732000061\r\n$6\r\n000042\r\n"), "n"),
            util::Micros(1732000061000042));
  // Found by fuzz_reply: a TIME that does not fit in microseconds overflowed (UB).
  for (const char* bytes :
       {"*2\r\n$19\r\n9223372036854775807\r\n$1\r\n0\r\n", "*2\r\n$2\r\n-1\r\n$1\r\n0\r\n",
        "*2\r\n$1\r\n1\r\n$7\r\n1000000\r\n"}) {
    try {
      store::redis::time_of(*read(bytes), "n");
      ADD_FAILURE() << "no error thrown for " << bytes;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::internal);
    }
  }
  // A reply of a type the command never gives is a bug somewhere: 70.
  try {
    store::redis::integer_of(*read("+OK\r\n"), "n");
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::internal);
  }
}

TEST(Reply, HugeArrayHeaderIsAProtocolError) {
  // Found by fuzz_reply: hiredis would calloc 16 GiB for the element pointers.
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader(store::redis::create_reader(),
                                                              redisReaderFree);
  const std::string bytes = "*2147483647\r\n";
  ASSERT_EQ(redisReaderFeed(reader.get(), bytes.data(), bytes.size()), REDIS_OK);
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader.get(), &reply), REDIS_ERR);
  EXPECT_EQ(reply, nullptr);
  // The replies nxlock reads are small arrays, still read as before.
  EXPECT_EQ(read("*3\r\n$6\r\nmaster\r\n:1\r\n*0\r\n")->elements, 3u);
}

TEST(Reply, Redirects) {
  auto redirect = store::redis::parse_redirect(*read("-MOVED 3999 127.0.0.1:6381\r\n"));
  ASSERT_TRUE(redirect);
  EXPECT_FALSE(redirect->ask);
  EXPECT_EQ(redirect->slot, 3999);
  EXPECT_EQ(redirect->address.host, "127.0.0.1");
  EXPECT_EQ(redirect->address.port, 6381);
  redirect = store::redis::parse_redirect(*read("-ASK 12 :7000\r\n"));
  ASSERT_TRUE(redirect);
  EXPECT_TRUE(redirect->ask);
  EXPECT_EQ(redirect->address.host, "");
  redirect = store::redis::parse_redirect(*read("-ASK 16383 [::1]:7000\r\n"));
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->address.host, "::1");
  EXPECT_FALSE(store::redis::parse_redirect(*read("-ERR something\r\n")));
  // Found by fuzz_reply: out of range, or not the "<slot> <host>:<port>" shape.
  for (const char* bytes : {"-ASK 13 :700000\r\n", "-MOVED 3999 h:0\r\n", "-MOVED 16384 h:7000\r\n",
                            "-MOVED -1 h:7000\r\n", "-MOVED 12x h:7000\r\n", "-MOVED 1 h:7000x\r\n",
                            "-ASK 13 :70-ASK 13 :7000\r\n"}) {
    EXPECT_FALSE(store::redis::parse_redirect(*read(bytes))) << bytes;
  }
  EXPECT_FALSE(store::redis::parse_redirect(*read("+MOVED 1 h:1\r\n")));
}

}  // namespace
}  // namespace nxlock
