// FileStore's tokens and lock owners (store/file/counter.cpp, owner.cpp, sweep.cpp): one
// counter, a live owner's lock kept whatever the clock, what a dead one leaves swept, and
// shared leases whatever stripes the keys share.
#include "unit/file_store_fixture.hpp"

namespace nxlock::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::FileStore;
using store::WaitResult;
using util::ErrorKind;

// ---- tokens, liveness, nothing left behind -----------------------------------------

// A key other than `avoid` whose bucket lies in `stripe` (two hex digits).
std::string key_in_stripe(const std::string& stripe, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string key = prefix + std::to_string(i);
    if (fnv1a64_hex(key).substr(0, 2) == stripe) {
      return key;
    }
  }
}

std::size_t files_in(const std::string& dir) {
  std::size_t n = 0;
  if (fs::exists(dir)) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      n += entry.is_directory() ? 0 : 1;
    }
  }
  return n;
}

// A child process that takes lock `key` (value `value`) in the store at `path`,
// writes beside it what run-locked writes, and then waits to be killed; or
// exits at once with `exit_at_once`. Returns its pid once the lock is taken.
pid_t owner_process(const std::string& path, const std::string& key, const std::string& value,
                    bool exit_at_once) {
  int ready[2];
  if (::pipe(ready) != 0) {
    return -1;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    int status = 0;
    try {
      FileStore::Options options;
      options.record_owner = true;  // as run-locked opens it
      FileStore store(path, options);
      status =
          store.set_if_absent(key, value, "{" + key + "}:fence", store::k_plain_step).fence ? 0 : 1;
      store.set("{" + key + "}:holder", "{\"acquired_at\":1,\"value\":\"" + value + "\"}",
                store::k_plain_step);
    } catch (const std::exception& e) {
      child_failed(e);
      status = 98;
    }
    (void)!::write(ready[1], "x", 1);
    if (!exit_at_once) {
      for (;;) {
        ::pause();
      }
    }
    ::_exit(status);
  }
  ::close(ready[1]);
  char byte = 0;
  (void)!::read(ready[0], &byte, 1);
  ::close(ready[0]);
  return pid;
}

void reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// One counter for the whole store, tokens at or above the clock in
// microseconds, and none lower after the counter is deleted.
TEST_F(FileStoreTest, TokensComeFromOneCounterAndStayAboveTheClock) {
  FileStore store(store_path(), {});
  std::int64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    const std::int64_t before = util::wall_now().count();
    const auto token =
        store.set_if_absent("k" + std::to_string(i % 2), "v", "c", store::k_plain_step).fence;
    ASSERT_TRUE(token.has_value());
    EXPECT_GE(*token, before);
    EXPECT_GT(*token, last);
    last = *token;
    ASSERT_TRUE(store.compare_and_delete("k" + std::to_string(i % 2), "v",
                                         store::Fence("c", *token), store::k_plain_step));
    if (i == 3) {
      fs::remove(store_path() + "/fence");
    }
  }
  // A released lock leaves nothing: no counter per key, no record.
  EXPECT_EQ(files_in(store_path() + "/data"), 0u);
  EXPECT_EQ(fs::file_size(store_path() + "/fence"), 20u);
  // A counter that is not one is refused, never overwritten.
  write_file(store_path() + "/fence", "garbage");
  EXPECT_EQ(error_kind([&] { store.set_if_absent("k", "v", "c", store::k_plain_step).fence; }),
            ErrorKind::data);
  EXPECT_EQ(store.get("k"), std::nullopt);
  EXPECT_EQ(read_file(store_path() + "/fence"), "garbage");
}

// The lock layer reads the per-lock counter Redis keeps: here it is the token
// in the lock's record, while the lock is there.
TEST_F(FileStoreTest, TheCounterBesideALockReadsAsItsToken) {
  FileStore store(store_path(), {});
  // The lock layer's names (store/keys.hpp), with and without a hash tag, and
  // for a key that holds a '}' but no tag.
  for (const auto& [key, counter] : std::vector<std::pair<std::string, std::string>>{
           {"k", "{k}:fence:k"}, {"{tag}rest", "{tag}:fence:{tag}rest"}, {"a}b", "}fence:a}b"}}) {
    const auto token = store.set_if_absent(key, "v", counter, store::k_plain_step).fence;
    ASSERT_TRUE(token.has_value());
    EXPECT_EQ(store.get(counter), std::to_string(*token)) << key;
    ASSERT_TRUE(
        store.compare_and_delete(key, "v", store::Fence(counter, *token), store::k_plain_step));
    EXPECT_EQ(store.get(counter), std::nullopt) << key;
  }
  // A key of that name (an older store's counter) shows while no lock is there.
  store.set("{k}:fence:k", "41", store::k_plain_step);
  EXPECT_EQ(store.get("{k}:fence:k"), "41");
  const auto token = store.set_if_absent("k", "v", "{k}:fence:k", store::k_plain_step).fence;
  EXPECT_EQ(store.get("{k}:fence:k"), std::to_string(*token));
  store.set("x", "not a lock", store::k_plain_step);
  EXPECT_EQ(store.get("{x}:fence:x"), std::nullopt);
  // Names of other shapes are plain keys.
  EXPECT_EQ(store.get("{k}:fence"), std::nullopt);
}

// While the process that took (or renewed) a lock runs, a caller
// whose clock says it expired does not take it; once the owner is stopped or
// gone, the timestamp decides as before.
TEST_F(FileStoreTest, ALiveOwnersLockIsNotTakenOverBecauseOfAClock) {
  create_store();
  const std::int64_t now = util::whole_seconds(util::wall_now());
  const std::string value = std::to_string(now + 5);
  const pid_t owner = owner_process(store_path(), "k", value, false);
  ASSERT_GT(owner, 0);
  FileStore store(store_path(), {});
  const std::int64_t an_hour_ahead = now + 3600;
  auto swap = store.get_and_set("k", "mine", store::Takeover{"{k}:fence", an_hour_ahead},
                                store::k_plain_step);
  EXPECT_EQ(swap.fence, std::nullopt);
  EXPECT_EQ(swap.old, std::to_string(an_hour_ahead)) << "held, as of the caller's now";
  EXPECT_EQ(store.get("k"), value) << "nothing written";

  // Stopped: it renews nothing, its timestamp alone counts.
  ASSERT_EQ(::kill(owner, SIGSTOP), 0);
  ASSERT_TRUE(wait_until(
      [&] {
        std::ifstream stat("/proc/" + std::to_string(owner) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        return text.find(") T ") != std::string::npos;
      },
      5000ms));
  swap = store.get_and_set("k", "mine", store::Takeover{"{k}:fence", an_hour_ahead},
                           store::k_plain_step);
  EXPECT_TRUE(swap.fence.has_value());
  EXPECT_EQ(swap.old, value);
  reap(owner);

  // Gone (a `lock` whose process exited): the timestamp decides.
  const pid_t gone = owner_process(store_path(), "g", value, true);
  reap(gone);
  swap = store.get_and_set("g", "mine", store::Takeover{"{g}:fence", an_hour_ahead},
                           store::k_plain_step);
  EXPECT_TRUE(swap.fence.has_value());
  // Liveness never ends a lock sooner: a fresh lock of a dead owner is held.
  const pid_t dead = owner_process(store_path(), "d", std::to_string(now + 60), true);
  reap(dead);
  swap = store.get_and_set("d", "mine", store::Takeover{"{d}:fence", now}, store::k_plain_step);
  EXPECT_EQ(swap.fence, std::nullopt);
}

// A process that does not renew while it lives (lock, run-locked --no-renew)
// is not recorded as the owner: its lock's timestamp alone decides.
TEST_F(FileStoreTest, ALockTakenWithoutRecordingTheOwnerEndsAtItsTimestamp) {
  create_store();
  const std::int64_t now = util::whole_seconds(util::wall_now());
  FileStore unrecorded(store_path(), {});
  ASSERT_TRUE(
      unrecorded.set_if_absent("k", std::to_string(now + 5), "{k}:fence:k", store::k_plain_step)
          .fence);
  // This very process lives on, but is not the lock's recorded owner.
  const pid_t caller = ::fork();
  if (caller == 0) {
    int status = 0;
    try {
      FileStore store(store_path(), {});
      status = store.get_and_set("k", "mine", store::Takeover{"{k}:fence:k", now + 3600},
                                 store::k_plain_step)
                       .fence
                   ? 0
                   : 1;
    } catch (const std::exception& e) {
      child_failed(e);
      status = 98;
    }
    ::_exit(status);
  }
  int status = -1;
  ASSERT_EQ(::waitpid(caller, &status, 0), caller);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the lock was kept";
}

// An owning step removes, from its stripe, the records of expired
// locks that nobody alive owns, and the details written beside them; never a
// plain key, never a lock whose owner lives.
TEST_F(FileStoreTest, AnOwningStepRemovesAbandonedExpiredLocksBesideIt) {
  create_store();
  const std::string stripe = fnv1a64_hex("{abandoned}:holder").substr(0, 2);
  const std::string abandoned = key_in_stripe(stripe, "abandoned-");
  const std::string held = key_in_stripe(stripe, "held-");
  const std::string plain = key_in_stripe(stripe, "plain-");
  const std::string expired = "1000000000";
  reap(owner_process(store_path(), abandoned, expired, true));
  const pid_t live = owner_process(store_path(), held, expired, false);
  FileStore store(store_path(), {});
  store.set(plain, expired, store::k_plain_step);
  const std::string holder = "{" + abandoned + "}:holder";
  ASSERT_TRUE(store.get(holder).has_value());

  // An owning step elsewhere in the stripe.
  const std::string later = key_in_stripe(stripe, "later-");
  ASSERT_TRUE(store.set_if_absent(later, "v", "c", store::k_plain_step).fence.has_value());
  // Its own holder record's stripe may differ: sweep that one too.
  const std::string holder_stripe = fnv1a64_hex(holder).substr(0, 2);
  const std::string beside = key_in_stripe(holder_stripe, "beside-");
  ASSERT_TRUE(store.set_if_absent(beside, "v", "c", store::k_plain_step).fence.has_value());

  EXPECT_EQ(store.get(abandoned), std::nullopt);
  EXPECT_EQ(store.get(holder), std::nullopt);
  EXPECT_EQ(store.get(held), expired) << "its owner lives";
  EXPECT_EQ(store.get(plain), expired) << "not nxlock's lock: never removed";
  reap(live);
}

// A FIFO of a waiter that died goes when a release meets it, even
// after its place in line lapsed; FIFOs take the store's bits, not the umask's.
TEST_F(FileStoreTest, ADeadWaitersFifoGoesAtTheNextRelease) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(store_path().c_str(), 02770), 0);
  FileStore holder(store_path(), {});
  const auto taken = holder.set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(taken.has_value());
  const std::string wait_dir = store_path() + "/wait";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t waiter = ::fork();
  if (waiter == 0) {
    ::close(ready[0]);
    ::umask(077);  // its FIFO still takes the store's bits
    FileStore store(store_path(), {});
    store.queue()->take_or_queue("k", "w", "c", "q", "qdead", true, 1ms, store::k_plain_step);
    auto watch = store.queue()->watch_turn("k", "qdead");
    watch->wait(1ms, -1);  // the FIFO is made and held
    (void)!::write(ready[1], "x", 1);
    for (;;) {
      ::pause();
    }
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(files_in(wait_dir), 1u);
  EXPECT_EQ(mode_of(wait_dir + "/qdead"), 0660u);
  reap(waiter);                      // killed: its FIFO stays on disk, open by nobody
  std::this_thread::sleep_for(5ms);  // and its place in line (a 1 ms lease) lapses
  ASSERT_EQ(files_in(wait_dir), 1u);
  ASSERT_TRUE(holder.queue()->release_and_wake("k", "v", store::Fence("c", *taken), "q",
                                               store::k_plain_step));
  EXPECT_EQ(files_in(wait_dir), 0u);
  EXPECT_EQ(holder.get("q"), std::nullopt) << "the line goes with it";
}

// A lease changes the lock's bucket and the leases' bucket in one transaction
// under both stripe locks: also when both live in one stripe (one flock, or the
// transaction would wait on itself) and in either stripe order.
TEST(FileStoreShared, LeasesWorkWhateverStripesTheTwoKeysShare) {
  TempDir dir;
  FileStore file(dir.path() + "/store", {});
  store::SharedLeases& shared = *file.shared();
  std::optional<std::string> same;
  std::optional<std::string> lower;
  std::optional<std::string> higher;
  for (int i = 0; i < 20000 && !(same && lower && higher); ++i) {
    const std::string key = "k" + std::to_string(i);
    const auto a = store::record::bucket_of(key).stripe;
    const auto b = store::record::bucket_of(store::shared_key(key)).stripe;
    auto& slot = a == b ? same : a < b ? lower : higher;
    if (!slot) {
      slot = key;
    }
  }
  ASSERT_TRUE(same && lower && higher);
  const std::int64_t expiry = util::whole_seconds(util::wall_now()) + 60;
  for (const auto& key : {*same, *lower, *higher}) {
    const std::string leases = store::shared_key(key);
    const std::string queue = store::queue_key(key);
    const std::string counter = store::fence_key(key);
    const store::SharedLeases::Keys keys{key, counter, leases, queue};
    store::SharedLeases::TakeRequest request;
    request.id = "s1";
    request.expiry = expiry;
    request.lease = util::Micros(1'000'000);
    const auto a = shared.take(keys, request, store::k_plain_step);
    request.id = "s2";
    request.expiry = expiry + 5;
    const auto b = shared.take(keys, request, store::k_plain_step);
    ASSERT_EQ(a.outcome, store::SharedLeases::Take::Outcome::taken) << key;
    ASSERT_EQ(b.outcome, store::SharedLeases::Take::Outcome::taken) << key;
    EXPECT_GT(*b.fence, *a.fence);
    EXPECT_EQ(file.get(key), std::to_string(expiry + 5));
    const store::LeaseSet set = shared.read(keys);
    EXPECT_EQ(set.leases.size(), 2u);
    EXPECT_TRUE(set.holding);
    EXPECT_EQ(set.lock_value, std::to_string(expiry + 5));
    EXPECT_TRUE(
        shared.release(keys, {.id = "s2", .expiry = {}, .token = *b.fence}, store::k_plain_step));
    EXPECT_EQ(file.get(key), std::to_string(expiry));
    EXPECT_TRUE(shared.release(keys, {.id = "s1", .expiry = {}, .token = {}}, store::k_plain_step));
    EXPECT_FALSE(
        shared.release(keys, {.id = "s1", .expiry = {}, .token = {}}, store::k_plain_step));
    EXPECT_EQ(file.get(key), std::nullopt);
    EXPECT_EQ(file.get(leases), std::nullopt);
  }
}

}  // namespace
}  // namespace nxlock::testing
