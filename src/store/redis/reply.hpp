// Reply mapping: what a Redis reply means to nxlock (a value, an error of nxlock's kinds, a
// redirect).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/url.hpp"
#include "util/error.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

// hiredis's types; only .cpp files include its header (reply.cpp and the code
// that reads replies need their fields), so that what uses a store never
// compiles against it.
struct redisReply;
struct redisReader;

namespace nxlock::store::redis {

struct ReplyDeleter {
  void operator()(redisReply* reply) const;
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// One command and the key it touches (empty if none), for error messages.
struct Command {
  std::vector<std::string_view> args;
  std::string_view key;
};

// A server's error reply. RESP errors start with a code, "TRYAGAIN Multiple
// keys request during rehashing of slot", "ERR unknown command 'X'": callers
// compare the code, never search the words.
struct ErrorReply {
  // The first word when it is a code (capital letters: ERR, NOPERM, MOVED),
  // else empty. Two errors older servers word otherwise carry the code newer
  // ones give: an error raised inside a script that Redis < 7 wraps ("ERR
  // Error running script (call to f_…): @user_script:1: WRONGTYPE …") has the
  // wrapped error's; an ACL's refusal inside a script, which Redis < 7.2
  // words under ERR ("… can't run this command or subcommand"), has NOPERM.
  std::string_view code;
  std::string_view text;  // the whole message, code included
};

// The error `reply` is; nullopt when it is not an error reply.
std::optional<ErrorReply> error_of(const redisReply& reply);

// error_of(reply)'s code; empty when `reply` is no error reply.
std::string_view error_code(const redisReply& reply);

// The util::Error for a server's error reply, with its code (ErrorReply::code)
// for callers that act on one (TRYAGAIN: retry otherwise).
class ServerError : public util::Error {
 public:
  ServerError(util::ErrorKind kind, std::string what, std::string why, std::string code)
      : util::Error(kind, std::move(what), std::move(why)), m_code(std::move(code)) {}
  const std::string& code() const { return m_code; }

 private:
  std::string m_code;
};

// The code of the server's error `error` reports (a ServerError's), empty for
// any other error.
std::string_view error_code(const util::Error& error);

// Cluster redirects: "MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381".
struct Redirect {
  bool ask = false;  // ASK: this command only, after ASKING; MOVED: the slot moved
  int slot = 0;      // 0 ≤ slot < 16384
  HostPort address;  // host empty: the node that answered (it did not know its address)
};

// A hiredis reader for a server's replies, or nullptr when out of memory. An
// array header announcing more elements than any reply nxlock reads is a
// protocol error ("Out of memory"), not an allocation of that many pointers.
redisReader* create_reader();

// The redirect an error reply asks for; nullopt for any other reply, and for a
// redirect whose slot or port is out of range (it is then reported as an error).
std::optional<Redirect> parse_redirect(const redisReply& reply);

// Throws the ServerError for a server's error reply (man page, EXIT STATUS):
// WRONGTYPE → data; auth failures and NOPERM → permission; anything else →
// unavailable, with the server's words.
[[noreturn]] void throw_reply_error(const redisReply& reply, const Command& command,
                                    const std::string& name);

// Throws util::Error (internal): a reply of a type the command never gives.
[[noreturn]] void throw_unexpected(const redisReply& reply, const std::string& name);

// An integer reply's value; any other reply is unexpected.
long long integer_of(const redisReply& reply, const std::string& name);

// A bulk string's bytes, nullopt for nil; any other reply is unexpected.
std::optional<std::string> string_of(const redisReply& reply, const std::string& name);

// An array of two elements: what the scripts that return a pair answer.
bool is_pair(const redisReply& reply);

// The integer 1: what a step that wrote answers, as the write path
// (RedisCore::write) asks of a reply.
bool said_one(const redisReply& reply);

// TIME's [seconds, microseconds] as microseconds since the epoch.
util::Micros time_of(const redisReply& reply, const std::string& name);

// Keys, values and replies in traces and messages are cut as every trace cuts them.
using util::k_trace_bytes;

// A reply on one line, for traces and messages.
std::string describe_reply(const redisReply& reply);

}  // namespace nxlock::store::redis
