// Reply mapping: hiredis replies to values, to nxlock's error kinds (man page, EXIT STATUS),
// and to cluster redirects.
#include "store/redis/reply.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <climits>

#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store::redis {

namespace {

using util::Error;
using util::ErrorKind;

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string_view reply_text(const redisReply& reply) {
  return {reply.str, reply.len};
}

// A code is a word of capital letters: ERR, NOPERM, CROSSSLOT.
std::string_view code_at_start(std::string_view text) {
  const std::string_view word = text.substr(0, text.find(' '));
  const bool capitals = !word.empty() && std::all_of(word.begin(), word.end(),
                                                     [](char c) { return c >= 'A' && c <= 'Z'; });
  return capitals ? word : std::string_view();
}

// Redis < 7 wraps an error raised inside a script: "ERR Error running script
// (call to f_…): @user_script:1: WRONGTYPE …", or "… @user_script: 1: -READONLY …".
// The wrapped error's code, or empty.
std::string_view wrapped_code(std::string_view text) {
  constexpr std::string_view k_marker = "@user_script:";
  if (!text.starts_with("ERR Error running script")) {
    return {};
  }
  const auto at = text.rfind(k_marker);
  if (at == std::string_view::npos) {
    return {};
  }
  std::string_view rest = text.substr(at + k_marker.size());
  rest.remove_prefix(std::min(rest.find_first_not_of(" 0123456789:"), rest.size()));
  if (rest.starts_with('-')) {
    rest.remove_prefix(1);
  }
  return code_at_start(rest);
}

// Errors that servers word under ERR, and the code that names them: the one
// newer servers give, where they give one.
struct Wording {
  std::string_view words;
  std::string_view code;
};
constexpr Wording k_worded_errors[] = {
    {"can't run this command", "NOPERM"},              // an ACL, inside a script (Redis < 7.2)
    {"invalid password", "WRONGPASS"},                 // AUTH, Redis < 6
    {"invalid username-password pair", "WRONGPASS"},   // AUTH, Redis 6.0
    {"without any password configured", "WRONGPASS"},  // AUTH, to a server that has none
};

// hiredis 0.14 allocates an array's element pointers as soon as it reads the
// header: "*2147483647\r\n" from a broken or hostile server would make it
// calloc 16 GiB. The largest reply nxlock reads is ROLE's list of replicas.
constexpr int k_max_array_elements = 1 << 16;

constexpr int k_slots = 16384;  // cluster.hpp's k_cluster_slots: the specification's number

// hiredis's own reply constructors (its defaultFunctions), set by the first create_reader().
const redisReplyObjectFunctions* g_hiredis_functions = nullptr;

void* create_bounded_array(const redisReadTask* task, int elements) {
  if (elements > k_max_array_elements) {
    return nullptr;  // the reader fails with REDIS_ERR_OOM, and the exchange with it
  }
  return g_hiredis_functions->createArray(task, elements);
}

}  // namespace

void ReplyDeleter::operator()(redisReply* reply) const {
  freeReplyObject(reply);
}

std::optional<ErrorReply> error_of(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ERROR) {
    return std::nullopt;
  }
  ErrorReply error{code_at_start(reply_text(reply)), reply_text(reply)};
  if (error.code == "ERR") {
    if (const auto wrapped = wrapped_code(error.text); !wrapped.empty()) {
      error.code = wrapped;
    }
  }
  if (error.code == "ERR") {
    for (const auto& [words, code] : k_worded_errors) {
      if (contains(error.text, words)) {
        error.code = code;
        break;
      }
    }
  }
  return error;
}

std::string_view error_code(const redisReply& reply) {
  const auto error = error_of(reply);
  return error ? error->code : std::string_view();
}

std::string_view error_code(const util::Error& error) {
  const auto* server = dynamic_cast<const ServerError*>(&error);
  return server ? std::string_view(server->code()) : std::string_view();
}

redisReader* create_reader() {
  redisReader* reader = redisReaderCreate();
  if (reader == nullptr) {
    return nullptr;
  }
  static redisReplyObjectFunctions bounded = [&] {
    g_hiredis_functions = reader->fn;
    redisReplyObjectFunctions functions = *reader->fn;
    functions.createArray = create_bounded_array;
    return functions;
  }();
  reader->fn = &bounded;
  return reader;
}

std::optional<Redirect> parse_redirect(const redisReply& reply) {
  const auto error = error_of(reply);
  if (!error || (error->code != "MOVED" && error->code != "ASK") ||
      error->text.size() <= error->code.size()) {
    return std::nullopt;
  }
  Redirect redirect;
  redirect.ask = error->code == "ASK";
  const std::string_view rest = error->text.substr(error->code.size() + 1);
  // "<slot> <host>:<port>"; the host may be an IPv6 address (the last ':' splits).
  const auto space = rest.find(' ');
  const auto colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  const auto slot_text = rest.substr(0, space);
  const auto port_text = rest.substr(colon + 1);
  const auto whole_number = [](std::string_view digits, int& value) {
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  // Found by fuzz_reply: a port or slot out of range ("ASK 13 :700000") was
  // followed. Such a reply is not a redirect; it is reported as the server's error.
  if (!whole_number(slot_text, redirect.slot) || redirect.slot < 0 || redirect.slot >= k_slots ||
      !whole_number(port_text, redirect.address.port) || redirect.address.port <= 0 ||
      redirect.address.port > 65535 ||
      rest.substr(space + 1, colon - space - 1).find(' ') != std::string_view::npos) {
    return std::nullopt;
  }
  redirect.address.host = std::string(rest.substr(space + 1, colon - space - 1));
  if (redirect.address.host.size() > 1 && redirect.address.host.front() == '[') {
    redirect.address.host = redirect.address.host.substr(1, redirect.address.host.size() - 2);
  }
  return redirect;
}

[[noreturn]] void throw_reply_error(const redisReply& reply, const Command& command,
                                    const std::string& name) {
  const ErrorReply error = error_of(reply).value_or(ErrorReply{{}, reply_text(reply)});
  const std::string code(error.code);
  std::string message = util::escape(error.text, 200);
  // An error raised inside one of our scripts ends in " script: <sha1>, on
  // @user_script:1.": noise to a user, who never wrote a script.
  if (const auto at = message.find(" script: "); at != std::string::npos) {
    message.resize(at);
  }
  std::string what = name;
  if (!command.key.empty()) {
    what += " key '" + util::escape(command.key, k_trace_bytes) + "'";
  }
  if (code == "WRONGTYPE") {
    throw ServerError(ErrorKind::data, what, message, code);
  }
  if (code == "NOAUTH") {
    // Asked of a client that gave no password (one it gave was WRONGPASS at AUTH).
    throw ServerError(ErrorKind::permission, name,
                      "authentication required; give --password-file FILE or NXLOCK_PASSWORD",
                      code);
  }
  if (code == "WRONGPASS") {
    // The server's own text never contains the password; it says which case it is.
    throw ServerError(ErrorKind::permission, name, "authentication failed (" + message + ")", code);
  }
  if (code == "NOPERM") {
    throw ServerError(ErrorKind::permission, what, message, code);
  }
  // OOM, READONLY, LOADING, MASTERDOWN, BUSY, and whatever else the server
  // says: the server is there but will not do it now. Never 70, which means a
  // bug in nxlock; the server's own words say what it was.
  throw ServerError(ErrorKind::unavailable, what, "server replied " + message, code);
}

[[noreturn]] void throw_unexpected(const redisReply& reply, const std::string& name) {
  throw Error(ErrorKind::internal, name,
              "unexpected reply from the server: " + describe_reply(reply));
}

bool is_pair(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ARRAY && reply.elements == 2;
}

bool said_one(const redisReply& reply) {
  return reply.type == REDIS_REPLY_INTEGER && reply.integer == 1;
}

long long integer_of(const redisReply& reply, const std::string& name) {
  if (reply.type != REDIS_REPLY_INTEGER) {
    throw_unexpected(reply, name);
  }
  return reply.integer;
}

std::optional<std::string> string_of(const redisReply& reply, const std::string& name) {
  if (reply.type == REDIS_REPLY_NIL) {
    return std::nullopt;
  }
  if (reply.type != REDIS_REPLY_STRING) {
    throw_unexpected(reply, name);
  }
  return std::string(reply.str, reply.len);
}

util::Micros time_of(const redisReply& reply, const std::string& name) {
  // TIME answers [seconds, microseconds], both as decimal strings.
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2) {
    throw_unexpected(reply, name);
  }
  long long parts[2] = {0, 0};
  for (std::size_t i = 0; i < 2; ++i) {
    const redisReply& element = *reply.element[i];
    if (element.type != REDIS_REPLY_STRING) {
      throw_unexpected(reply, name);
    }
    const auto [end, ec] = std::from_chars(element.str, element.str + element.len, parts[i]);
    if (ec != std::errc() || end != element.str + element.len) {
      throw_unexpected(reply, name);
    }
  }
  // Found by fuzz_reply: seconds near LLONG_MAX overflowed the multiplication.
  if (parts[0] < 0 || parts[0] > LLONG_MAX / 1'000'000 - 1 || parts[1] < 0 ||
      parts[1] >= 1'000'000) {
    throw_unexpected(reply, name);
  }
  return util::Micros(parts[0] * 1'000'000 + parts[1]);
}

std::string describe_reply(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      return std::to_string(reply.integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out = "[";
      for (std::size_t i = 0; i < reply.elements; ++i) {
        out += i == 0 ? "" : " ";
        out += describe_reply(*reply.element[i]);
      }
      return out + "]";
    }
    default:
      return util::escape(reply_text(reply), k_trace_bytes);
  }
}

}  // namespace nxlock::store::redis
