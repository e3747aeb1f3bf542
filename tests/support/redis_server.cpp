// RedisServer: starts and always stops a real redis-server for the tests.
#include "support/redis_server.hpp"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include "support/test_helpers.hpp"
#include "util/fd.hpp"

namespace nxlock::testing {

namespace {

using Context = std::unique_ptr<redisContext, decltype(&redisFree)>;
using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

constexpr auto k_start_timeout = std::chrono::seconds(10);
constexpr auto k_term_grace = std::chrono::seconds(3);
constexpr int k_start_attempts = 5;

std::string find_redis_server() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const auto end = std::min(dirs.find(':', begin), dirs.size());
    const std::string candidate = dirs.substr(begin, end - begin) + "/redis-server";
    if (end > begin && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return "/usr/bin/redis-server";
}

// A port nobody listens on right now. Another process may take it before the
// server binds it; the caller retries with a new one if the server fails.
int free_port() {
  util::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (!fd || bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot find a free port");
  }
  return ntohs(address.sin_port);
}

std::string reply_text(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      return std::to_string(reply.integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY:
      return "[" + std::to_string(reply.elements) + " elements]";
    default:
      return std::string(reply.str, reply.len);
  }
}

}  // namespace

RedisServer::RedisServer(Options options) : m_options(std::move(options)) {
  // A server that goes away under a test must fail that test, not kill the
  // binary with SIGPIPE (nxlock's own main ignores SIGPIPE the same way).
  signal(SIGPIPE, SIG_IGN);
  m_dir = make_temp_dir("nxlock-redis");
  m_unix_path = m_dir + "/redis.sock";
  for (int attempt = 0; attempt < k_start_attempts; ++attempt) {
    if (start_once(free_port())) {
      return;
    }
  }
  throw std::runtime_error("redis-server did not start; see " + m_dir + "/redis.log");
}

RedisServer::~RedisServer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(m_dir, ignored);
}

bool RedisServer::start_once(int port) {
  std::vector<std::string> args = {find_redis_server(),
                                   "--port",
                                   std::to_string(port),
                                   "--bind",
                                   "127.0.0.1",
                                   "--unixsocket",
                                   m_unix_path,
                                   "--unixsocketperm",
                                   "700",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--dir",
                                   m_dir,
                                   "--logfile",
                                   m_dir + "/redis.log"};
  if (m_options.password) {
    args.insert(args.end(), {"--requirepass", *m_options.password});
  }
  args.insert(args.end(), m_options.extra_args.begin(), m_options.extra_args.end());
  if (m_options.acl_user) {
    args.insert(args.end(), {"--user", *m_options.acl_user, "on",
                             ">" + m_options.acl_password.value_or(""), "~*", "&*", "+@all"});
  }
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    // Dies with the test binary, even if that is killed: no leaked servers.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
      _exit(127);  // the parent died before prctl took effect
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  m_pid = pid;
  m_port = port;

  bool exited = false;
  const bool answered = wait_until(
      [&] {
        int status = 0;
        exited = waitpid(m_pid, &status, WNOHANG) == m_pid;
        return exited || answers_ping();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(k_start_timeout),
      std::chrono::milliseconds(5));
  if (exited) {
    m_pid = -1;  // exited: most likely the port was taken meanwhile
    return false;
  }
  if (answered) {
    return true;
  }
  stop();
  return false;
}

bool RedisServer::answers_ping() const {
  // Through the unix socket in our private dir: whatever answers there is our
  // server, and it creates the socket only after binding the TCP port.
  const timeval timeout{1, 0};
  Context context(redisConnectUnixWithTimeout(m_unix_path.c_str(), timeout), redisFree);
  if (!context || context->err != 0) {
    return false;
  }
  Reply reply(static_cast<redisReply*>(redisCommand(context.get(), "PING")), freeReplyObject);
  // Any answer will do: a server with a password says NOAUTH, but it is up.
  return reply != nullptr;
}

std::string RedisServer::command(const std::vector<std::string>& args) const {
  const timeval timeout{5, 0};
  Context context(redisConnectUnixWithTimeout(m_unix_path.c_str(), timeout), redisFree);
  if (!context || context->err != 0) {
    throw std::runtime_error("cannot connect to the test redis-server at " + m_unix_path);
  }
  redisSetTimeout(context.get(), timeout);
  if (m_options.password) {
    Reply auth(
        static_cast<redisReply*>(redisCommand(context.get(), "AUTH %b", m_options.password->data(),
                                              m_options.password->size())),
        freeReplyObject);
    if (!auth || auth->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error("cannot authenticate to the test redis-server");
    }
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  Reply reply(static_cast<redisReply*>(redisCommandArgv(
                  context.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())),
              freeReplyObject);
  if (!reply) {
    throw std::runtime_error("the test redis-server did not answer " + args.front());
  }
  return reply_text(*reply);
}

void RedisServer::stop() {
  if (m_pid <= 0) {
    return;
  }
  kill(m_pid, SIGTERM);
  int status = 0;
  const bool ended = wait_until(
      [&] {
        const pid_t done = waitpid(m_pid, &status, WNOHANG);
        return done == m_pid || (done < 0 && errno != EINTR);
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(k_term_grace),
      std::chrono::milliseconds(5));
  if (!ended) {
    kill(m_pid, SIGKILL);
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  m_pid = -1;
}

void RedisServer::restart() {
  stop();
  // The port was ours a moment ago; another process could take it meanwhile,
  // but on a loopback test machine that is rare enough to fail the test.
  for (int attempt = 0; attempt < k_start_attempts; ++attempt) {
    if (start_once(m_port)) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a bound: before trying again
  }
  throw std::runtime_error("redis-server did not restart; see " + m_dir + "/redis.log");
}

RedisServer& shared_redis() {
  static RedisServer server;
  return server;
}

}  // namespace nxlock::testing
