// FileStore's watches (store/file/watcher.cpp): one inotify instance per store, a watcher
// per key that wakes for another process and ignores other keys of its stripe.
#include "unit/file_store_fixture.hpp"

namespace nxlock::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::FileStore;
using store::WaitResult;
using util::ErrorKind;

// ---- watching ----------------------------------------------------------------------

TEST_F(FileStoreTest, AWatcherIgnoresOtherKeysInItsStripe) {
  FileStore store(store_path(), {});
  std::string neighbour;
  for (int i = 0; neighbour.empty(); ++i) {
    const std::string candidate = "n" + std::to_string(i);
    if (fnv1a64_hex(candidate).substr(0, 2) == fnv1a64_hex("k").substr(0, 2)) {
      neighbour = candidate;
    }
  }
  const auto watcher = store.watch("k");
  store.set(neighbour, "x", store::k_plain_step);
  EXPECT_EQ(watcher->wait(50ms, -1), WaitResult::timed_out);
  store.set("k", "y", store::k_plain_step);
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);
}

TEST_F(FileStoreTest, AWatcherOutlivesItsDirectory) {
  FileStore store(store_path(), {});
  const auto watcher = store.watch("k");
  fs::remove_all(stripe_path("k"));  // someone cleans up under a waiting lock
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);
  EXPECT_EQ(watcher->wait(50ms, -1), WaitResult::timed_out);
  store.set("k", "v", store::k_plain_step);
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);  // now by polling
}

TEST_F(FileStoreTest, AWatcherWakesForAnotherProcess) {
  FileStore store(store_path(), {});
  const auto watcher = store.watch("k");
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(gate[1]);
    char byte;
    (void)!::read(gate[0], &byte, 1);
    FileStore other(store_path(), {});
    ::_exit(other.set_if_absent("k", "theirs", std::nullopt, store::k_plain_step) ? 0 : 1);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // lets the child go: the watch is already armed
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(store.get("k"), "theirs");
}

// This process's open inotify instances.
int inotify_instances() {
  int count = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    if (fs::read_symlink(entry.path(), error).string() == "anon_inode:inotify") {
      ++count;
    }
  }
  return count;
}

// Closing an inotify instance that had a watch waits for a kernel grace period
// (BENCHMARKS.md, "One inotify instance per store"): a waiter that has just taken
// its lock must not spend that before its job starts, so the store keeps one
// instance for all its watches.
TEST_F(FileStoreTest, AWatchEndsWithoutClosingTheStoresInotifyInstance) {
  FileStore store(store_path(), {});
  const int before = inotify_instances();
  store.watch("k").reset();
  EXPECT_EQ(inotify_instances(), before + 1);  // still open, owned by the store
  store.watch("j").reset();
  EXPECT_EQ(inotify_instances(), before + 1);  // the same one again
}

TEST_F(FileStoreTest, AWatcherIgnoresAnEarlierWatchersEventsInTheSharedInstance) {
  FileStore store(store_path(), {});
  std::string other;  // a key in another stripe
  for (int i = 0; other.empty(); ++i) {
    const std::string candidate = "o" + std::to_string(i);
    if (fnv1a64_hex(candidate).substr(0, 2) != fnv1a64_hex("k").substr(0, 2)) {
      other = candidate;
    }
  }
  auto first = store.watch("k");
  store.set("k", "v", store::k_plain_step);  // an event the first watcher never reads
  first.reset();
  const auto second = store.watch(other);
  EXPECT_EQ(second->wait(50ms, -1), WaitResult::timed_out);
  store.set(other, "w", store::k_plain_step);
  EXPECT_EQ(second->wait(2s, -1), WaitResult::changed);
}

TEST_F(FileStoreTest, TwoWatchersAtOnceBothWake) {
  FileStore store(store_path(), {});
  const auto one = store.watch("k");
  const auto two = store.watch("k");
  store.set("k", "v", store::k_plain_step);
  EXPECT_EQ(one->wait(2s, -1), WaitResult::changed);
  EXPECT_EQ(two->wait(2s, -1), WaitResult::changed);
}

}  // namespace
}  // namespace nxlock::testing
