// FileStore under many processes: atomic steps between them, a writer killed at any
// instant, the durable mode's syncs, a waiter leaving the line.
#include "unit/file_store_fixture.hpp"

namespace nxlock::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::FileStore;
using store::WaitResult;
using util::ErrorKind;

// ---- many processes, crashes ------------------------------------------------------

TEST_F(FileStoreTest, ConcurrentProcessesStayAtomic) {
  constexpr int k_processes = 4;
  constexpr int k_operations = 500;
  constexpr int k_keys = 8;
  create_store();

  // Each child reports, per key, how many times it made the key present
  // (set_if_absent true, get_and_set of nothing) and absent (del). With atomic
  // operations these alternate, so per key: made present - made absent = present now.
  int results[2];
  ASSERT_EQ(::pipe(results), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < k_processes; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(results[0]);
      std::int64_t counts[k_keys][2] = {};
      try {
        FileStore store(store_path(), {});
        std::mt19937 random(static_cast<unsigned>(p + 1));
        const std::string me = "process " + std::to_string(p);
        for (int i = 0; i < k_operations; ++i) {
          const int k = static_cast<int>(random() % k_keys);
          const std::string key = "shared:" + std::to_string(k);
          switch (random() % 3) {
            case 0:
              counts[k][0] +=
                  store.set_if_absent(key, me, std::nullopt, store::k_plain_step) ? 1 : 0;
              break;
            case 1:
              counts[k][0] +=
                  store.get_and_set(key, me, std::nullopt, store::k_plain_step).old ? 0 : 1;
              break;
            default:
              counts[k][1] += static_cast<std::int64_t>(store.del({key}));
              break;
          }
        }
      } catch (const std::exception& e) {
        child_failed(e);
        ::_exit(1);
      }
      const bool written = ::write(results[1], counts, sizeof counts) == sizeof counts;
      ::_exit(written ? 0 : 2);
    }
    children.push_back(pid);
  }
  ::close(results[1]);
  std::int64_t totals[k_keys][2] = {};
  for (int p = 0; p < k_processes; ++p) {
    std::int64_t counts[k_keys][2] = {};
    ASSERT_EQ(::read(results[0], counts, sizeof counts), static_cast<ssize_t>(sizeof counts));
    for (int k = 0; k < k_keys; ++k) {
      totals[k][0] += counts[k][0];
      totals[k][1] += counts[k][1];
    }
  }
  ::close(results[0]);
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  FileStore store(store_path(), {});
  for (int k = 0; k < k_keys; ++k) {
    const auto value = store.get("shared:" + std::to_string(k));  // parses the bucket
    EXPECT_EQ(totals[k][0] - totals[k][1], value ? 1 : 0) << "key " << k;
    if (value) {
      EXPECT_TRUE(value->starts_with("process ")) << *value;
    }
  }
}

TEST_F(FileStoreTest, KillingAWriterAtAnyInstantLeavesAWholeRecord) {
  create_store();
  for (int round = 0; round < 20; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      FileStore store(store_path(), {});
      for (std::uint64_t i = 0;; ++i) {
        // Large values, so a kill often lands mid-write.
        store.set("k", std::string(200 * 1024, static_cast<char>('a' + i % 26)),
                  store::k_plain_step);
        if (i == 0) {
          (void)!::write(ready[1], "x", 1);
        }
      }
    }
    ::close(ready[1]);
    char byte;
    const bool started = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    // Some writes later: the instant does not matter, that is the point.
    ::usleep(static_cast<useconds_t>(round * 500));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_TRUE(started);

    FileStore store(store_path(), {});
    const auto value = store.get("k");
    ASSERT_TRUE(value.has_value());
    ASSERT_EQ(value->size(), 200u * 1024);
    EXPECT_EQ(value->find_first_not_of(value->front()), std::string::npos);
  }
}

// Durable mode gives the same answers, and syncs every write that reported
// success (the record before its rename, the directory after it or after an
// unlink); the default mode syncs nothing once the store exists.
TEST_F(FileStoreTest, DurableModeWorksTheSameAndSyncsEveryWrite) {
  FileStore::Options options;
  options.durable = true;
  FileStore store(store_path(), options);
  store.set("other", "x",
            store::k_plain_step);  // the data directory and the stripes exist from here on
  store.set("k", "x", store::k_plain_step);
  EXPECT_TRUE(store.compare_and_delete("k", "x", std::nullopt, store::k_plain_step));

  const auto syncs_of = [](const std::function<void()>& operation) {
    const int before = g_syncs;
    operation();
    return g_syncs - before;
  };
  int syncs = syncs_of(
      [&] { EXPECT_TRUE(store.set_if_absent("k", "v", std::nullopt, store::k_plain_step)); });
  EXPECT_GE(syncs, 2) << "durable set_if_absent: record and directory";
  syncs = syncs_of(
      [&] { EXPECT_EQ(store.get_and_set("k", "w", std::nullopt, store::k_plain_step).old, "v"); });
  EXPECT_GE(syncs, 2) << "durable get_and_set: record and directory";
  syncs = syncs_of([&] {
    EXPECT_TRUE(store.compare_and_set("k", "w", "y", std::nullopt, store::k_plain_step));
  });
  EXPECT_GE(syncs, 2) << "durable compare_and_set: record and directory";
  syncs = syncs_of(
      [&] { EXPECT_TRUE(store.compare_and_delete("k", "y", std::nullopt, store::k_plain_step)); });
  EXPECT_GE(syncs, 1) << "durable compare_and_delete: the directory after the unlink";
  syncs = syncs_of([&] { EXPECT_EQ(store.get("k"), std::nullopt); });
  EXPECT_EQ(syncs, 0) << "a read";
  syncs = syncs_of(
      [&] { EXPECT_FALSE(store.compare_and_delete("k", "y", std::nullopt, store::k_plain_step)); });
  EXPECT_EQ(syncs, 0) << "a write that changed nothing";

  FileStore fast(store_path(), {});
  syncs = syncs_of([&] {
    EXPECT_TRUE(fast.set_if_absent("k", "v", std::nullopt, store::k_plain_step));
    EXPECT_TRUE(fast.compare_and_delete("k", "v", std::nullopt, store::k_plain_step));
  });
  EXPECT_EQ(syncs, 0) << "the default mode";
}

// The waiter that takes the lock leaves the line at its store's next write
// (with run-locked, the holder's record once the job runs), not between the
// lock and the job; and its own release is such a write, so the next waiter
// is first by then. Another store (process) sees the line meanwhile.
TEST_F(FileStoreTest, TheWaiterThatTakesTheLockLeavesTheLineAtItsNextWrite) {
  const util::Micros lease(5'000'000);
  FileStore holder(store_path(), {});
  FileStore other(store_path(), {});
  other.set("k", "held", store::k_plain_step);
  ASSERT_EQ(holder.queue()
                ->take_or_queue("k", "v", "c", "q", "qa", true, lease, store::k_plain_step)
                .outcome,
            store::WaitersQueue::QueuedSet::Outcome::held);
  ASSERT_EQ(other.queue()
                ->take_or_queue("k", "w", "c", "q", "qb", true, lease, store::k_plain_step)
                .outcome,
            store::WaitersQueue::QueuedSet::Outcome::behind);
  ASSERT_EQ(other.del({"k"}), 1u);

  const auto taken =
      holder.queue()->take_or_queue("k", "v", "c", "q", "qa", true, lease, store::k_plain_step);
  ASSERT_EQ(taken.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  EXPECT_NE(other.get("q").value_or("").find("qa "), std::string::npos) << "not left yet";
  holder.set("holder-record", "x", store::k_plain_step);
  EXPECT_EQ(other.get("q").value_or("").find("qa "), std::string::npos) << "left at the write";
  EXPECT_NE(other.get("q").value_or("").find("qb "), std::string::npos);

  // Taken again and released at once: the release leaves the line first, so
  // the next waiter is first when it is woken.
  ASSERT_TRUE(holder.queue()->release_and_wake("k", "v", store::Fence("c", *taken.fence), "q",
                                               store::k_plain_step));
  ASSERT_EQ(holder.queue()
                ->take_or_queue("k", "v", "c", "q", "qa", true, lease, store::k_plain_step)
                .outcome,
            store::WaitersQueue::QueuedSet::Outcome::behind);
  const auto b =
      other.queue()->take_or_queue("k", "w", "c", "q", "qb", true, lease, store::k_plain_step);
  ASSERT_EQ(b.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  ASSERT_TRUE(other.queue()->release_and_wake("k", "w", store::Fence("c", *b.fence), "q",
                                              store::k_plain_step));
  EXPECT_EQ(holder.get("q").value_or("").find("qb "), std::string::npos);

  // A store that closes leaves the line too.
  {
    FileStore short_lived(store_path(), {});
    ASSERT_EQ(short_lived.queue()
                  ->take_or_queue("k", "v", "c", "q", "qa", true, lease, store::k_plain_step)
                  .outcome,
              store::WaitersQueue::QueuedSet::Outcome::set);
    EXPECT_NE(other.get("q").value_or("").find("qa "), std::string::npos);
  }
  EXPECT_EQ(other.get("q"), std::nullopt) << "the line is empty";
}

TEST_F(FileStoreTest, TheEmptyKeyDoesNotCrash) {
  FileStore store(store_path(), {});
  EXPECT_TRUE(store.set_if_absent("", "v", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store.get(""), "v");
  EXPECT_EQ(store.del({""}), 1u);
}

}  // namespace
}  // namespace nxlock::testing
