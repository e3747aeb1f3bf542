// RedisServer: a real redis-server for tests, on a free port and a unix socket, always stopped.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace nxlock::testing {

class RedisServer {
 public:
  struct Options {
    std::optional<std::string> password;  // --requirepass
    // An ACL user with every permission, for tests of redis://USER:PASSWORD@.
    std::optional<std::string> acl_user;
    std::optional<std::string> acl_password;
    std::vector<std::string> extra_args;  // e.g. {"--enable-debug-command", "yes"}
  };

  // Starts redis-server (from PATH, else /usr/bin/redis-server) in a fresh temp
  // dir, listening on 127.0.0.1:<free port> and <dir>/redis.sock, and waits
  // (at most 10 s) until it answers. Throws std::runtime_error naming the temp
  // dir (left behind, with the server's log) if it does not come up.
  RedisServer() : RedisServer(Options{}) {}
  explicit RedisServer(Options options);
  // Stops the server: SIGTERM, SIGKILL after 3 s, waitpid; removes the temp dir.
  ~RedisServer();

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return m_port; }
  const std::string& unix_path() const { return m_unix_path; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(m_port); }
  std::string unix_url() const { return "unix://" + m_unix_path; }

  // Runs one command as the default user (authenticated if the server needs
  // it) and returns the reply as text: the string, the integer, or "(nil)";
  // "ERR ..." for an error reply. Throws std::runtime_error if unreachable.
  std::string command(const std::vector<std::string>& args) const;

  // Empties every db.
  void flushall() const { command({"FLUSHALL"}); }

  // Stops the server now (idempotent); later connections are refused.
  void stop();

  // Stops the server and starts it again on the same port and socket.
  // Throws std::runtime_error if it does not come back.
  void restart();

 private:
  bool start_once(int port);
  bool answers_ping() const;

  Options m_options;
  std::string m_dir;
  std::string m_unix_path;
  int m_port = 0;
  pid_t m_pid = -1;
};

// One server shared by the whole test binary, started on first use and
// stopped at exit; tests that need their own configuration start their own.
RedisServer& shared_redis();

}  // namespace nxlock::testing
