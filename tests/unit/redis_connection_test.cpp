// The Redis connection layer against real redis-servers: reconnects, deadlines, the deadline cap,
// close-on-exec.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/redis_store.hpp"
#include "support/redis_server.hpp"
#include "support/test_helpers.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"

namespace nxlock::testing {
namespace {

using namespace std::chrono_literals;
using store::ConnectOptions;
using store::RedisStore;
using store::Url;
using store::WaitResult;
using util::ErrorKind;

ConnectOptions with_timeout(double seconds) {
  ConnectOptions options;
  options.timeout_seconds = seconds;
  return options;
}

// A server that answers DEBUG SLEEP, for stalls longer than a timeout.
RedisServer& debug_redis() {
  static RedisServer server(RedisServer::Options{{}, {}, {}, {"--enable-debug-command", "yes"}});
  return server;
}

// Stalls the whole server for `seconds` (DEBUG SLEEP from another connection);
// returns once the stall has most likely begun. Join the thread after.
std::thread stall(RedisServer& server, double seconds) {
  std::thread sleeper([&server, seconds] {
    server.command({"DEBUG", "SLEEP", std::to_string(seconds)});
  });
  // No condition can be awaited from here on a server that is busy: give the
  // DEBUG SLEEP a moment to arrive first.
  std::this_thread::sleep_for(200ms);
  return sleeper;
}

TEST(RedisConnection, ReconnectsAfterTheServerKilledTheIdleConnection) {
  RedisServer server;
  RedisStore store(tcp_url(server.port()), ConnectOptions{});
  store.set("k", "v", store::k_plain_step);
  // Our connection is the only normal client besides the one command() opens
  // (SKIPME yes by default): the server closes it, as an idle-client timeout would.
  EXPECT_EQ(server.command({"CLIENT", "KILL", "TYPE", "normal"}), "1");
  // The idle connection is found dead before anything is written into it, so
  // this first operation already works: nothing is retried after a failure.
  EXPECT_EQ(store.get("k"), "v");
  EXPECT_TRUE(store.set_if_absent("k2", "v", std::nullopt, store::k_plain_step));
}

TEST(RedisConnection, ReconnectsAfterARestartOnTheSamePort) {
  RedisServer server;
  RedisStore store(tcp_url(server.port()), ConnectOptions{});
  auto watcher = store.watch("k");
  store.set("k", "v", store::k_plain_step);
  server.restart();  // no persistence: the key is gone, the server is back
  EXPECT_EQ(store.get("k"), std::nullopt);
  EXPECT_TRUE(store.set_if_absent("k", "w", std::nullopt, store::k_plain_step));

  // The watcher saw its connection break: look again (no exception).
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  // It resubscribes on the next wait, and says so: a change may have been missed.
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  // Then it is a working watch again: quiet until the key changes.
  EXPECT_EQ(watcher->wait(200ms, -1), WaitResult::timed_out);
  EXPECT_EQ(store.del({"k"}), 1u);  // wakes the watcher in the same round trip
  const auto started = util::mono_now();
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  EXPECT_LT(seconds_since(started), 5.0);
}

TEST(RedisConnection, AStallLongerThanTheTimeoutFailsWithinItAndTheNextOperationWorks) {
  RedisServer& server = debug_redis();
  RedisStore store(tcp_url(server.port()), with_timeout(0.5));
  store.set("k", "v", store::k_plain_step);
  auto sleeper = stall(server, 2);
  const auto started = util::mono_now();
  const auto error = error_from([&] { store.get("k"); });
  EXPECT_EQ(error.kind(), ErrorKind::unavailable);
  EXPECT_EQ(error.reason(), "timed out after 0.5s");
  EXPECT_LT(seconds_since(started), 1.5);
  sleeper.join();
  // The late reply to the timed-out GET must not be taken for the next
  // command's: the connection was dropped, and this one is fresh.
  EXPECT_TRUE(store.set_if_absent("k2", "x", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store.get("k"), "v");
}

TEST(RedisConnection, SetDeadlineCapsAWaitBelowTheTimeout) {
  RedisServer& server = debug_redis();
  RedisStore store(tcp_url(server.port()), with_timeout(10));
  store.set("k", "v", store::k_plain_step);
  auto sleeper = stall(server, 2);
  store.set_deadline(util::mono_now() + util::Micros(300ms));
  const auto started = util::mono_now();
  const auto error = error_from([&] { store.get("k"); });
  EXPECT_EQ(error.kind(), ErrorKind::unavailable);
  EXPECT_NE(error.reason().find("deadline"), std::string::npos) << error.reason();
  EXPECT_LT(seconds_since(started), 1.5);
  store.set_deadline(std::nullopt);
  sleeper.join();
  EXPECT_EQ(store.get("k"), "v");

  // A cap already passed fails at once, without waiting for anything.
  store.set_deadline(util::mono_now() - util::Micros(1ms));
  EXPECT_EQ(error_from([&] { store.get("k"); }).kind(), ErrorKind::unavailable);
  store.set_deadline(std::nullopt);
  EXPECT_EQ(store.get("k"), "v");
}

TEST(RedisConnection, AResetInTheMiddleOfAWriteIsUnavailable) {
  // SIGPIPE's default action, as a process started from a shell has it: a
  // broken connection must be an error, whatever the disposition. (The reset
  // surfaces as ECONNRESET here; the EPIPE of a later write, which MSG_NOSIGNAL
  // keeps from raising SIGPIPE, is not reachable on purpose from a test.)
  signal(SIGPIPE, SIG_DFL);
  util::UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_EQ(listen(listener.get(), 8), 0);
  // A "server" that reads a little of the request and resets the connection.
  std::thread server([&listener] {
    util::UniqueFd client(accept(listener.get(), nullptr, nullptr));
    char buffer[4096];
    (void)!recv(client.get(), buffer, sizeof buffer, 0);
    const linger reset{1, 0};
    setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  });
  RedisStore store(tcp_url(ntohs(address.sin_port)), ConnectOptions{});
  // Far more than the socket buffers hold: the write is still going on when
  // the reset comes, and the next send gets EPIPE.
  const std::string value(64 << 20, 'x');
  const auto error = error_from([&] { store.set("k", value, store::k_plain_step); });
  server.join();
  EXPECT_EQ(error.kind(), ErrorKind::unavailable) << error.what();
}

TEST(RedisConnection, SocketsAreCloseOnExec) {
  RedisServer server;
  RedisStore store(tcp_url(server.port()), ConnectOptions{});
  const auto watcher = store.watch("k");
  Url unix_url;
  unix_url.scheme = Url::Scheme::redis_unix;
  unix_url.path = server.unix_path();
  unix_url.redacted = server.unix_url();
  RedisStore unix_store(unix_url, ConnectOptions{});

  int sockets = 0;
  DIR* dir = opendir("/proc/self/fd");
  ASSERT_NE(dir, nullptr);
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") {
      continue;
    }
    const int fd = std::stoi(name);
    if (fd == dirfd(dir)) {
      continue;
    }
    char target[256] = {};
    const std::string link = "/proc/self/fd/" + name;
    if (readlink(link.c_str(), target, sizeof target - 1) > 0 &&
        std::string(target).rfind("socket:", 0) == 0) {
      ++sockets;
      EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "fd " << fd << " " << target;
    }
  }
  closedir(dir);
  EXPECT_GE(sockets, 3);  // the store's, the watcher's, the unix store's
}

}  // namespace
}  // namespace nxlock::testing
