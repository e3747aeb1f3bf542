// Compare-and-delete and compare-and-set stay atomic when another client writes between steps.
//
// A client-side GET-then-DEL (or GET-then-SET) gives the right answers as long
// as nobody else writes in between; these tests put a takeover exactly there.
// Whatever the implementation, the takeover either lands before the compare
// (nothing is deleted or set) or after the whole operation: in both cases the
// thief's value is what the key holds at the end.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "store/file/file_store.hpp"
#include "store/make_store.hpp"
#include "store/url.hpp"
#include "support/redis_server.hpp"
#include "support/test_helpers.hpp"
#include "util/fd.hpp"

namespace nxlock::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string k_mine = "1732000011";
const std::string k_thief = "1732000099";
const std::string k_next = "1732000042";

// ---- Redis: a TCP proxy that lets a second client write between two commands ----

// Forwards bytes between the store and a real redis-server. Once armed, it runs
// `hook` (once) just before it forwards client bytes that follow a reply the
// server sent after arming: i.e. between a command whose answer the client has
// read and the next one it sends. One command (a script) gives it no such gap.
class InterleavingProxy {
 public:
  InterleavingProxy(int upstream_port, std::function<void()> hook)
      : m_upstream_port(upstream_port), m_hook(std::move(hook)) {
    m_listen.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (!m_listen || ::bind(m_listen.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(m_listen.get(), 8) != 0 ||
        ::getsockname(m_listen.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("proxy: cannot listen");
    }
    m_port = ntohs(addr.sin_port);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("proxy: pipe");
    }
    m_stop_read.reset(fds[0]);
    m_stop_write.reset(fds[1]);
    m_thread = std::thread([this] { run(); });
  }
  ~InterleavingProxy() {
    [[maybe_unused]] auto written = ::write(m_stop_write.get(), "x", 1);
    m_thread.join();
  }
  InterleavingProxy(const InterleavingProxy&) = delete;
  InterleavingProxy& operator=(const InterleavingProxy&) = delete;

  int port() const { return m_port; }
  void arm() {
    m_replied = false;
    m_fired = false;
    m_armed = true;
  }
  // Disarms; true if the hook ran while armed.
  bool disarm() {
    m_armed = false;
    return m_fired;
  }

 private:
  struct Pair {
    util::UniqueFd client;
    util::UniqueFd server;
  };

  util::UniqueFd connect_upstream() const {
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(m_upstream_port));
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return {};
    }
    return fd;
  }

  static bool forward(int from, int to) {
    char buffer[65536];
    const ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n <= 0) {
      return false;
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(to, buffer + done, static_cast<std::size_t>(n - done));
      if (w <= 0) {
        return false;
      }
      done += w;
    }
    return true;
  }

  void run() {
    std::vector<Pair> pairs;
    for (;;) {
      std::vector<pollfd> fds{{m_stop_read.get(), POLLIN, 0}, {m_listen.get(), POLLIN, 0}};
      for (const auto& pair : pairs) {
        fds.push_back({pair.client.get(), POLLIN, 0});
        fds.push_back({pair.server.get(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        continue;
      }
      if (fds[0].revents != 0) {
        return;
      }
      // Only the pairs polled above: fds has no entries for one accepted below.
      const std::size_t polled = pairs.size();
      std::vector<bool> closed(polled, false);
      for (std::size_t i = 0; i < polled; ++i) {
        const pollfd& from_client = fds[2 + 2 * i];
        const pollfd& from_server = fds[3 + 2 * i];
        if (from_server.revents != 0) {
          if (m_armed) {
            m_replied = true;
          }
          closed[i] = !forward(pairs[i].server.get(), pairs[i].client.get());
        }
        if (from_client.revents != 0 && !closed[i]) {
          if (m_armed && m_replied && !m_fired) {
            m_fired = true;
            m_hook();
          }
          closed[i] = !forward(pairs[i].client.get(), pairs[i].server.get());
        }
      }
      for (std::size_t i = polled; i-- > 0;) {
        if (closed[i]) {
          pairs.erase(pairs.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
      if (fds[1].revents != 0) {
        util::UniqueFd client(::accept4(m_listen.get(), nullptr, nullptr, SOCK_CLOEXEC));
        util::UniqueFd server = connect_upstream();
        if (client && server) {
          pairs.push_back({std::move(client), std::move(server)});
        }
      }
    }
  }

  int m_upstream_port;
  std::function<void()> m_hook;
  util::UniqueFd m_listen;
  util::UniqueFd m_stop_read;
  util::UniqueFd m_stop_write;
  int m_port = 0;
  std::atomic<bool> m_armed{false};
  std::atomic<bool> m_replied{false};
  std::atomic<bool> m_fired{false};
  std::thread m_thread;
};

class RedisRace : public ::testing::Test {
 protected:
  void SetUp() override {
    m_key = std::string("race:") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    m_redis.command({"DEL", m_key});
    m_store = store::make_store(
        store::parse_url("redis://127.0.0.1:" + std::to_string(m_proxy.port())), {});
    m_store->set(m_key, k_mine,
                 store::k_plain_step);  // connects through the proxy before the race is armed
    ASSERT_EQ(m_redis.command({"GET", m_key}), k_mine);
  }

  // Runs `operation` with the takeover armed; if the operation left no gap for
  // it, the takeover happens right after (the other linearisation).
  void race(const std::function<void()>& operation) {
    m_proxy.arm();
    operation();
    if (!m_proxy.disarm()) {
      take_over();
    }
  }

  void take_over() { m_redis.command({"SET", m_key, k_thief}); }

  RedisServer& m_redis = shared_redis();
  InterleavingProxy m_proxy{m_redis.port(), [this] { take_over(); }};
  std::unique_ptr<store::Store> m_store;
  std::string m_key;
};

TEST_F(RedisRace, CompareAndDeleteNeverDeletesATakeover) {
  race([&] { m_store->compare_and_delete(m_key, k_mine, std::nullopt, store::k_plain_step); });
  EXPECT_EQ(m_redis.command({"GET", m_key}), k_thief)
      << "a takeover between the compare and the delete was deleted: not atomic";
}

TEST_F(RedisRace, CompareAndSetNeverOverwritesATakeover) {
  race([&] { m_store->compare_and_set(m_key, k_mine, k_next, std::nullopt, store::k_plain_step); });
  EXPECT_EQ(m_redis.command({"GET", m_key}), k_thief)
      << "a takeover between the compare and the set was overwritten: not atomic";
}

// The proxy does open the gap a two-command version would have: GET then SET.
TEST_F(RedisRace, TheProxyInterleavesBetweenTwoCommands) {
  bool equal = false;
  race([&] {
    equal = m_store->get(m_key) == k_mine;
    m_store->set(m_key, k_next, store::k_plain_step);
  });
  EXPECT_TRUE(equal);
  EXPECT_EQ(m_redis.command({"GET", m_key}), k_next);  // the takeover came before the SET
}

// ---- the file store: a takeover while the operation waits for its stripe lock ----

// The thread's current system call number, or -1 while it runs in user space.
long current_syscall(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  in >> first;
  try {
    return first == "running" ? -1 : std::stol(first);
  } catch (const std::exception&) {
    return -1;
  }
}

std::string single_entry(const fs::path& dir, bool directories) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() == directories && entry.path().filename().string()[0] != '.') {
      found.push_back(entry.path());
    }
  }
  if (found.size() != 1) {
    throw std::runtime_error("expected one entry in " + dir.string());
  }
  return found.front().filename();
}

class FileRace : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = make_temp_dir("nxlock-race");
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(m_dir, ignored);
  }

  // Holds the key's stripe lock (as a writer would), starts `operation` in a
  // thread, waits until it blocks on that lock, then writes the thief's value
  // the way a writer holding the lock does (a whole bucket renamed into place),
  // and lets go. An atomic operation compares only once it has the lock.
  void race(const std::function<void(store::FileStore&)>& operation) {
    const std::string key = "k";
    store::FileStore store(m_dir + "/store", {});
    store.set(key, k_mine, store::k_plain_step);
    const fs::path data = fs::path(m_dir) / "store" / "data";
    const fs::path stripe = data / single_entry(data, true);
    const std::string bucket = single_entry(stripe, false);
    {  // the thief's bucket, from a store of its own (same key: same stripe and name)
      store::FileStore other(m_dir + "/other", {});
      other.set(key, k_thief, store::k_plain_step);
    }
    const fs::path thief_bucket = fs::path(m_dir) / "other" / "data" / stripe.filename() / bucket;
    ASSERT_TRUE(fs::exists(thief_bucket));

    const util::UniqueFd lock(::open(stripe.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(lock);
    ASSERT_EQ(::flock(lock.get(), LOCK_EX), 0);
    std::atomic<pid_t> tid{0};
    std::thread worker([&] {
      tid = static_cast<pid_t>(::syscall(SYS_gettid));
      operation(store);
    });
    bool blocked = false;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!blocked && std::chrono::steady_clock::now() < deadline) {
      blocked = tid != 0 && current_syscall(tid) == SYS_flock;
      if (!blocked) {
        std::this_thread::sleep_for(1ms);
      }
    }
    EXPECT_TRUE(blocked) << "the operation never waited for the stripe lock";
    fs::copy_file(thief_bucket, stripe / ".race.tmp");
    fs::rename(stripe / ".race.tmp", stripe / bucket);
    ASSERT_EQ(::flock(lock.get(), LOCK_UN), 0);
    worker.join();
    m_after = store.get(key);
  }

  std::string m_dir;
  std::optional<std::string> m_after;
};

TEST_F(FileRace, CompareAndDeleteNeverDeletesATakeover) {
  bool deleted = true;
  race([&](store::FileStore& store) {
    deleted = store.compare_and_delete("k", k_mine, std::nullopt, store::k_plain_step);
  });
  EXPECT_FALSE(deleted);
  EXPECT_EQ(m_after, k_thief) << "a takeover between the compare and the delete was deleted";
}

TEST_F(FileRace, CompareAndSetNeverOverwritesATakeover) {
  bool replaced = true;
  race([&](store::FileStore& store) {
    replaced = store.compare_and_set("k", k_mine, k_next, std::nullopt, store::k_plain_step);
  });
  EXPECT_FALSE(replaced);
  EXPECT_EQ(m_after, k_thief) << "a takeover between the compare and the set was overwritten";
}

}  // namespace
}  // namespace nxlock::testing
