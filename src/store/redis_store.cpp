// RedisStore: the Store operations as Redis commands over hiredis, and pub/sub wake-ups.
#include "store/redis_store.hpp"

#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using util::Error;
using util::ErrorKind;
using Context = std::unique_ptr<redisContext, decltype(&redisFree)>;
using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

// Shown instead of AUTH's arguments in traces (ccache's k_redacted_secret).
constexpr std::string_view k_redacted_secret = "***";

// Waiters SUBSCRIBE here; whoever changes the key PUBLISHes. Channels are not
// scoped by db, so equal keys in two dbs only cause spurious wake-ups.
constexpr std::string_view k_wake_prefix = "nxlock:wake:";

// Both scripts must run on the server: done as GET, compare, then DEL/SET from
// here, another client could take over an expired lock between our GET and our
// write, and we would delete or overwrite its fresh lock. A script is atomic.
// The deleting script also wakes the key's waiters: in the same round trip, so a
// released lock's next holder is not kept waiting for a separate PUBLISH.
constexpr std::string_view k_compare_and_delete_script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) "
    "redis.call('PUBLISH', ARGV[2], '1') return 1 else return 0 end";
constexpr std::string_view k_compare_and_set_script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) "
    "return 1 else return 0 end";

// Where a command goes and how errors name it.
struct Endpoint {
  const std::string& name;  // the redacted URL
  double timeout_seconds;
};

// One command and the key it touches (empty if none), for error messages.
struct Command {
  std::vector<std::string_view> args;
  std::string_view key;
};

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Keys and values are arbitrary bytes: escape control bytes so a message or a
// trace stays one readable line, and cut long values short.
std::string printable(std::string_view text, std::size_t max_length = 120) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max_length; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f || byte == '\\') {
      out += '\\';
      out += 'x';
      out += k_hex[byte >> 4];
      out += k_hex[byte & 0xf];
    } else {
      out += text[i];
    }
  }
  if (text.size() > max_length) {
    out += "…";
  }
  return out;
}

// "2", "0.3": the timeout as the user gave it.
std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds << 's';
  return out.str();
}

timeval to_timeval(double seconds) {
  const double whole = std::floor(seconds);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(whole);
  tv.tv_usec = static_cast<suseconds_t>((seconds - whole) * 1e6);
  return tv;
}

std::string_view reply_text(const redisReply& reply) {
  return {reply.str, reply.len};
}

std::string script_name(std::string_view script) {
  if (script == k_compare_and_delete_script) {
    return "<compare-and-delete>";
  }
  if (script == k_compare_and_set_script) {
    return "<compare-and-set>";
  }
  return printable(script, 40);
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
      return printable(reply_text(reply));
  }
}

// `redis: SETNX lock.foo 1732000061 → 1`, with secrets and scripts elided.
void trace_command(const Command& command, const redisReply* reply, std::string_view failure) {
  std::string line = "redis:";
  const bool is_auth = command.args.front() == "AUTH";
  const bool is_eval = command.args.front() == "EVAL";
  for (std::size_t i = 0; i < command.args.size(); ++i) {
    line += ' ';
    if (i > 0 && is_auth) {
      line += k_redacted_secret;
    } else if (i == 1 && is_eval) {
      line += script_name(command.args[i]);
    } else {
      line += printable(command.args[i]);
    }
  }
  line += " → ";
  line += reply ? describe_reply(*reply) : std::string(failure);
  util::trace(line);
}

// Why a connection failed, in the user's words.
std::string connection_failure(const redisContext* context, double timeout_seconds) {
  if (context == nullptr) {
    return "cannot allocate a connection";
  }
  const std::string_view text = context->errstr;
  // A connect that hits the timeout fails with ETIMEDOUT; a read or write that
  // hits SO_RCVTIMEO/SO_SNDTIMEO fails with EAGAIN.
  if (context->err == REDIS_ERR_IO &&
      (text == std::strerror(ETIMEDOUT) || text == std::strerror(EAGAIN) ||
       text == std::strerror(EINPROGRESS))) {
    return "timed out after " + seconds_text(timeout_seconds);
  }
  if (context->err == REDIS_ERR_EOF) {
    return "server closed the connection";
  }
  if (text.empty()) {
    return "connection failed";
  }
  std::string reason(text);
  reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return reason;
}

[[noreturn]] void throw_connection_error(const redisContext* context, const Endpoint& endpoint) {
  throw Error(ErrorKind::unavailable, endpoint.name,
              connection_failure(context, endpoint.timeout_seconds));
}

// Maps the server's error reply to the outcome class the user sees.
[[noreturn]] void throw_reply_error(const redisReply& reply, const Command& command,
                                    const Endpoint& endpoint) {
  std::string message = printable(reply_text(reply), 200);
  // An error raised inside one of our scripts ends in " script: <sha1>, on
  // @user_script:1.": noise to a user, who never wrote a script.
  if (const auto at = message.find(" script: "); at != std::string::npos) {
    message.resize(at);
  }
  std::string what = endpoint.name;
  if (!command.key.empty()) {
    what += " key '" + printable(command.key) + "'";
  }
  // Redis 7 keeps WRONGTYPE as the code of an error raised inside a script,
  // but older servers wrap it ("ERR Error running script ... WRONGTYPE").
  if (contains(message, "WRONGTYPE")) {
    throw Error(ErrorKind::data, what, message);
  }
  if (starts_with(message, "NOAUTH") || starts_with(message, "WRONGPASS") ||
      contains(message, "invalid password") ||
      contains(message, "invalid username-password pair") ||
      (starts_with(message, "ERR AUTH") && contains(message, "without any password configured"))) {
    // The server's own text never contains the password; it says which case it is.
    throw Error(ErrorKind::permission, endpoint.name, "authentication failed (" + message + ")");
  }
  if (starts_with(message, "NOPERM")) {
    throw Error(ErrorKind::permission, what, message);
  }
  if (starts_with(message, "LOADING") || starts_with(message, "BUSY") ||
      starts_with(message, "MASTERDOWN")) {
    throw Error(ErrorKind::unavailable, endpoint.name, message);
  }
  throw Error(ErrorKind::internal, what, "server replied " + message);
}

// Sends `commands` in one round trip and returns their replies in order.
// Every command goes through here: a lost connection and error replies become
// util::Error, so callers only ever see good replies.
std::vector<Reply> execute(redisContext* context, const std::vector<Command>& commands,
                           const Endpoint& endpoint) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& command : commands) {
    argv.clear();
    lengths.clear();
    for (const auto arg : command.args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    // Explicit lengths: keys and values may contain NUL or any other byte.
    if (redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      throw_connection_error(context, endpoint);
    }
  }
  std::vector<Reply> replies;
  for (const auto& command : commands) {
    void* raw = nullptr;
    const int status = redisGetReply(context, &raw);
    Reply reply(static_cast<redisReply*>(raw), freeReplyObject);
    if (status != REDIS_OK || !reply) {
      if (util::tracing()) {
        trace_command(command, nullptr, connection_failure(context, endpoint.timeout_seconds));
      }
      throw_connection_error(context, endpoint);
    }
    if (util::tracing()) {
      trace_command(command, reply.get(), {});
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      throw_reply_error(*reply, command, endpoint);
    }
    replies.push_back(std::move(reply));
  }
  return replies;
}

[[noreturn]] void throw_unexpected(const redisReply& reply, const std::string& name) {
  throw Error(ErrorKind::internal, name,
              "unexpected reply from the server: " + describe_reply(reply));
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
  return std::string(reply_text(reply));
}

// Connects, sets the per-command timeout and authenticates; selects the db if
// asked. AUTH and SELECT travel in one round trip: start-up time is most of
// what an nxlock invocation costs.
Context connect(const Url& url, const ConnectOptions& options, bool select_db) {
  const Endpoint endpoint{url.redacted, options.timeout_seconds};
  const timeval timeout = to_timeval(options.timeout_seconds);
  Context context(url.scheme == Url::Scheme::redis_unix
                      ? redisConnectUnixWithTimeout(url.path.c_str(), timeout)
                      : redisConnectWithTimeout(url.host.c_str(), url.port, timeout),
                  redisFree);
  if (!context || context->err != 0) {
    throw_connection_error(context.get(), endpoint);
  }
  if (redisSetTimeout(context.get(), timeout) != REDIS_OK) {
    throw_connection_error(context.get(), endpoint);
  }

  const std::optional<std::string>& password = options.password ? options.password : url.password;
  std::vector<Command> setup;
  if (password) {
    Command auth{{"AUTH"}, {}};
    if (url.user) {
      auth.args.push_back(*url.user);
    }
    auth.args.push_back(*password);
    setup.push_back(std::move(auth));
  }
  const std::string db = std::to_string(url.db);
  if (select_db && url.db != 0) {
    setup.push_back({{"SELECT", db}, {}});
  }
  if (!setup.empty()) {
    execute(context.get(), setup, endpoint);
  }
  return context;
}

std::string wake_channel(std::string_view key) {
  std::string channel(k_wake_prefix);
  channel += key;
  return channel;
}

// Waits on a subscriber connection: any message on the key's channel means
// "look again". Owns its connection, so it outlives nothing it needs.
class RedisWatcher final : public Watcher {
 public:
  RedisWatcher(Context context, std::string name, double timeout_seconds)
      : m_context(std::move(context)),
        m_name(std::move(name)),
        m_timeout_seconds(timeout_seconds) {}

  WaitResult wait(util::Micros timeout, int interrupt_fd) override {
    // hiredis may already hold a message it read along with an earlier reply;
    // the socket would never turn readable for it.
    if (take_buffered()) {
      return WaitResult::changed;
    }
    const util::Micros deadline = util::mono_now() + std::max(timeout, util::Micros(0));
    for (;;) {
      pollfd fds[2] = {{m_context->fd, POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
      const nfds_t count = interrupt_fd >= 0 ? 2 : 1;
      const int ready = poll(fds, count, milliseconds_until(deadline));
      if (ready < 0) {
        if (errno == EINTR) {
          continue;  // the deadline is absolute: the retry waits only what is left
        }
        throw Error(ErrorKind::internal, m_name, std::string("poll: ") + std::strerror(errno));
      }
      if (ready == 0) {
        return WaitResult::timed_out;
      }
      if (count == 2 && fds[1].revents != 0) {
        return WaitResult::interrupted;  // left unread: it is the caller's
      }
      if (fds[0].revents != 0) {
        read_message();
        return WaitResult::changed;
      }
    }
  }

 private:
  static int milliseconds_until(util::Micros deadline) {
    const auto left = deadline - util::mono_now();
    if (left <= util::Micros(0)) {
      return 0;
    }
    // Round up: rounding down would wake just before the deadline and spin.
    const auto ms = (left.count() + 999) / 1000;
    return static_cast<int>(std::min<long long>(ms, INT_MAX));
  }

  bool take_buffered() {
    void* raw = nullptr;
    if (redisGetReplyFromReader(m_context.get(), &raw) != REDIS_OK) {
      throw_connection_error(m_context.get(), endpoint());
    }
    Reply reply(static_cast<redisReply*>(raw), freeReplyObject);
    return reply != nullptr;
  }

  // The message is already arriving, so this read does not wait for long.
  void read_message() {
    void* raw = nullptr;
    const int status = redisGetReply(m_context.get(), &raw);
    Reply reply(static_cast<redisReply*>(raw), freeReplyObject);
    if (status != REDIS_OK || !reply) {
      throw_connection_error(m_context.get(), endpoint());
    }
    if (util::tracing()) {
      util::trace("redis: (subscriber) ← " + describe_reply(*reply));
    }
  }

  Endpoint endpoint() const { return {m_name, m_timeout_seconds}; }

  Context m_context;
  std::string m_name;
  double m_timeout_seconds;
};

}  // namespace

RedisStore::RedisStore(const Url& url, const ConnectOptions& options)
    : m_url(url), m_options(options), m_context(connect(url, options, true)) {}

RedisStore::~RedisStore() = default;

RedisStore::Reply RedisStore::run(std::initializer_list<std::string_view> args,
                                  std::string_view key) {
  std::vector<Command> commands{{std::vector<std::string_view>(args), key}};
  auto replies = execute(m_context.get(), commands, {m_url.redacted, m_options.timeout_seconds});
  return std::move(replies.front());
}

bool RedisStore::set_if_absent(std::string_view key, std::string_view value) {
  const auto reply = run({"SETNX", key, value}, key);
  return integer_of(*reply, m_url.redacted) == 1;
}

std::optional<std::string> RedisStore::get(std::string_view key) {
  const auto reply = run({"GET", key}, key);
  return string_of(*reply, m_url.redacted);
}

std::optional<std::string> RedisStore::get_and_set(std::string_view key, std::string_view value) {
  // GETSET rather than SET ... GET: the documented pattern names GETSET, and
  // it works on servers older than 6.2.
  const auto reply = run({"GETSET", key, value}, key);
  return string_of(*reply, m_url.redacted);
}

void RedisStore::set(std::string_view key, std::string_view value) {
  run({"SET", key, value}, key);
}

std::size_t RedisStore::del(const std::vector<std::string>& keys) {
  if (keys.empty()) {
    return 0;  // DEL with no keys is a syntax error, and the answer is known
  }
  Command command{{"DEL"}, keys.size() == 1 ? std::string_view(keys.front()) : std::string_view()};
  for (const auto& key : keys) {
    command.args.push_back(key);
  }
  const auto replies =
      execute(m_context.get(), {command}, {m_url.redacted, m_options.timeout_seconds});
  return static_cast<std::size_t>(integer_of(*replies.front(), m_url.redacted));
}

bool RedisStore::compare_and_delete(std::string_view key, std::string_view expected) {
  // A script, not GET then DEL: see k_compare_and_delete_script.
  const std::string channel = wake_channel(key);
  const auto reply =
      run({"EVAL", k_compare_and_delete_script, "1", key, expected, channel}, key);
  return integer_of(*reply, m_url.redacted) == 1;
}

bool RedisStore::compare_and_set(std::string_view key, std::string_view expected,
                                 std::string_view value) {
  // A script, not GET then SET: see k_compare_and_set_script.
  const auto reply = run({"EVAL", k_compare_and_set_script, "1", key, expected, value}, key);
  return integer_of(*reply, m_url.redacted) == 1;
}

util::Micros RedisStore::now() {
  const auto reply = run({"TIME"}, {});
  // TIME answers [seconds, microseconds], both as decimal strings.
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
    throw_unexpected(*reply, m_url.redacted);
  }
  long long parts[2] = {0, 0};
  for (std::size_t i = 0; i < 2; ++i) {
    const redisReply& element = *reply->element[i];
    if (element.type != REDIS_REPLY_STRING) {
      throw_unexpected(*reply, m_url.redacted);
    }
    const auto [end, ec] = std::from_chars(element.str, element.str + element.len, parts[i]);
    if (ec != std::errc() || end != element.str + element.len) {
      throw_unexpected(*reply, m_url.redacted);
    }
  }
  return util::Micros(parts[0] * 1'000'000 + parts[1]);
}

std::unique_ptr<Watcher> RedisStore::watch(std::string_view key) {
  // A second connection, opened only now that a waiter actually waits: a
  // subscribed connection can run no other command. Pub/sub ignores the db,
  // so it needs no SELECT.
  auto context = connect(m_url, m_options, false);
  const std::string channel = wake_channel(key);
  const Endpoint endpoint{m_url.redacted, m_options.timeout_seconds};
  // Reading the confirmation is what arms the watch: once the server has
  // answered SUBSCRIBE, every later PUBLISH on the channel reaches us.
  const auto replies = execute(context.get(), {{{"SUBSCRIBE", channel}, key}}, endpoint);
  if (replies.front()->type != REDIS_REPLY_ARRAY) {
    throw_unexpected(*replies.front(), m_url.redacted);
  }
  return std::make_unique<RedisWatcher>(std::move(context), m_url.redacted,
                                        m_options.timeout_seconds);
}

void RedisStore::notify(std::string_view key) {
  const std::string channel = wake_channel(key);
  run({"PUBLISH", channel, "1"}, key);
}

}  // namespace nxlock::store
