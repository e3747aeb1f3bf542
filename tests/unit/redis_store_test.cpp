// RedisStore against a real redis-server: the store contract, plus errors, auth, dbs and wake-ups.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "store/redis/redis_store.hpp"
#include "support/redis_server.hpp"
#include "support/test_helpers.hpp"
#include "unit/store_contract.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

namespace nxlock::testing {
namespace {

using namespace std::chrono_literals;
using store::ConnectOptions;
using store::RedisStore;
using store::Url;
using store::WaitResult;
using util::ErrorKind;

Url unix_url(const RedisServer& server) {
  Url url;
  url.scheme = Url::Scheme::redis_unix;
  url.path = server.unix_path();
  url.redacted = server.unix_url();
  return url;
}

ConnectOptions with_password(std::string password, double timeout_seconds = 2.0) {
  ConnectOptions options;
  options.password = std::move(password);
  options.timeout_seconds = timeout_seconds;
  return options;
}

const StoreFactory k_redis_tcp{"redis_tcp", [] {
                                 shared_redis().flushall();
                                 return std::make_unique<RedisStore>(tcp_url(shared_redis().port()),
                                                                     ConnectOptions{});
                               }};
const StoreFactory k_redis_unix{"redis_unix", [] {
                                  shared_redis().flushall();
                                  return std::make_unique<RedisStore>(unix_url(shared_redis()),
                                                                      ConnectOptions{});
                                }};

INSTANTIATE_TEST_SUITE_P(Redis, StoreContract, ::testing::Values(&k_redis_tcp, &k_redis_unix),
                         factory_name);
INSTANTIATE_TEST_SUITE_P(Redis, QueueContract, ::testing::Values(&k_redis_tcp, &k_redis_unix),
                         factory_name);

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { shared_redis().flushall(); }

  static std::unique_ptr<RedisStore> open(int db = 0) {
    return std::make_unique<RedisStore>(tcp_url(shared_redis().port(), db), ConnectOptions{});
  }
};

constexpr const char* k_password = "s3cret-Pass";
constexpr const char* k_user = "alice";
constexpr const char* k_user_password = "alice-Pass";

// One server with a password and an ACL user, shared by the auth tests.
RedisServer& auth_redis() {
  static RedisServer server(
      RedisServer::Options{std::string(k_password), std::string(k_user), k_user_password, {}});
  return server;
}

TEST_F(RedisStoreTest, ConnectionRefusedIsUnavailable) {
  const auto start = util::mono_now();
  const auto error = error_from([] { RedisStore store(tcp_url(1), ConnectOptions{}); });
  EXPECT_EQ(error.kind(), ErrorKind::unavailable);
  EXPECT_EQ(error.subject(), "redis://127.0.0.1:1");
  EXPECT_EQ(error.reason(), "connection refused");
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST_F(RedisStoreTest, MissingUnixSocketIsUnavailable) {
  Url url;
  url.scheme = Url::Scheme::redis_unix;
  url.path = "/nonexistent/nxlock-test/redis.sock";
  url.redacted = "unix://" + url.path;
  const auto error = error_from([&] { RedisStore store(url, ConnectOptions{}); });
  EXPECT_EQ(error.kind(), ErrorKind::unavailable);
  EXPECT_EQ(error.subject(), url.redacted);
}

TEST_F(RedisStoreTest, SilentServerTimesOut) {
  // The kernel completes the handshake for a listening socket nobody accepts
  // on: the connection succeeds and then nothing ever answers.
  util::UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_EQ(listen(listener.get(), 8), 0);

  ConnectOptions options;
  options.timeout_seconds = 0.3;
  const auto start = util::mono_now();
  const auto error = error_from([&] {
    RedisStore store(tcp_url(ntohs(address.sin_port)), options);
    store.get("k");
  });
  EXPECT_EQ(error.kind(), ErrorKind::unavailable);
  EXPECT_NE(error.reason().find("timed out"), std::string::npos) << error.what();
  EXPECT_EQ(error.reason(), "timed out after 0.3s");
  EXPECT_GE(seconds_since(start), 0.25);
  EXPECT_LT(seconds_since(start), 1.5);
}

TEST_F(RedisStoreTest, WrongPasswordIsPermissionAndNotShown) {
  const std::string wrong = "Wrong-Secret-42";
  const auto error =
      error_from([&] { RedisStore store(tcp_url(auth_redis().port()), with_password(wrong)); });
  EXPECT_EQ(error.kind(), ErrorKind::permission);
  EXPECT_NE(error.reason().find("authentication failed"), std::string::npos) << error.what();
  EXPECT_EQ(std::string(error.what()).find(wrong), std::string::npos) << error.what();
}

TEST_F(RedisStoreTest, RightPasswordWorks) {
  RedisStore store(tcp_url(auth_redis().port()), with_password(k_password));
  store.set("k", "v", store::k_plain_step);
  EXPECT_EQ(store.get("k"), "v");
}

TEST_F(RedisStoreTest, PasswordFromUrlWorksAndOptionOverridesIt) {
  Url url = tcp_url(auth_redis().port());
  url.password = k_password;
  {
    RedisStore store(url, ConnectOptions{});
    store.set("k", "v", store::k_plain_step);
  }
  url.password = "not-the-password";
  RedisStore store(url, with_password(k_password));
  EXPECT_EQ(store.get("k"), "v");
}

TEST_F(RedisStoreTest, NoPasswordForProtectedServerIsPermission) {
  // Nothing is sent while connecting without a password: the first command
  // is refused with NOAUTH.
  RedisStore store(tcp_url(auth_redis().port()), ConnectOptions{});
  const auto error = error_from([&] { store.get("k"); });
  EXPECT_EQ(error.kind(), ErrorKind::permission);
}

TEST_F(RedisStoreTest, AclUserWithRightAndWrongPassword) {
  Url url = tcp_url(auth_redis().port());
  url.user = k_user;
  url.password = k_user_password;
  {
    RedisStore store(url, ConnectOptions{});
    store.set("acl", "yes", store::k_plain_step);
    EXPECT_EQ(store.get("acl"), "yes");
  }
  url.password = "wrong-for-alice";
  const auto error = error_from([&] { RedisStore store(url, ConnectOptions{}); });
  EXPECT_EQ(error.kind(), ErrorKind::permission);
  EXPECT_EQ(std::string(error.what()).find("wrong-for-alice"), std::string::npos);
}

TEST_F(RedisStoreTest, PasswordForServerWithoutOneIsPermission) {
  const auto error = error_from(
      [] { RedisStore store(tcp_url(shared_redis().port()), with_password("needless")); });
  EXPECT_EQ(error.kind(), ErrorKind::permission);
  EXPECT_EQ(std::string(error.what()).find("needless"), std::string::npos);
}

TEST_F(RedisStoreTest, TraceRedactsAuth) {
  auth_redis().flushall();
  std::vector<std::string> lines;
  util::set_trace_sink([&](std::string_view line) { lines.emplace_back(line); });
  {
    RedisStore store(tcp_url(auth_redis().port()), with_password(k_password));
    store.set_if_absent("lock.foo", "1732000061", std::nullopt, store::k_plain_step);
  }
  util::set_trace_sink({});
  // The connection's setup is the backend's own to trace; the SETNX step is
  // traced once, by TracingStore (tracing_store_test.cpp), not here.
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "redis: AUTH *** → OK");
  for (const auto& line : lines) {
    EXPECT_EQ(line.find(k_password), std::string::npos) << line;
  }
}

// A release hands the first queued waiter its turn on that waiter's own
// channel: the key's channel, which every waiter listens to, stays quiet, so
// the processes of the waiters behind it do not even wake to read it.
TEST_F(RedisStoreTest, AQueuedReleaseWakesNoProcessButTheFirstWaiters) {
  const auto store = open();
  const auto holder = store->queue()->take_or_queue("k", "v-qh", "c", "q", "qh", false,
                                                    util::Micros(30'000'000), store::k_plain_step);
  ASSERT_EQ(holder.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  ASSERT_EQ(store->queue()
                ->take_or_queue("k", "v-qa", "c", "q", "qa", true, util::Micros(30'000'000),
                                store::k_plain_step)
                .outcome,
            store::WaitersQueue::QueuedSet::Outcome::held);
  const auto first = store->queue()->watch_turn("k", "qa");
  const auto key_channel = store->watch("k");  // hears every message on the key's channel
  EXPECT_TRUE(store->queue()->release_and_wake("k", "v-qh", store::Fence("c", *holder.fence), "q",
                                               store::k_plain_step));
  EXPECT_EQ(first->wait(5s, -1), WaitResult::changed);
  EXPECT_EQ(key_channel->wait(300ms, -1), WaitResult::timed_out);
  // With nobody in line, a release still wakes every watcher.
  const auto again = store->queue()->take_or_queue("k", "v-qa", "c", "q", "qa", true,
                                                   util::Micros(30'000'000), store::k_plain_step);
  ASSERT_EQ(again.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  EXPECT_TRUE(store->queue()->release_and_wake("k", "v-qa", store::Fence("c", *again.fence), "q",
                                               store::k_plain_step));
  EXPECT_EQ(key_channel->wait(5s, -1), WaitResult::changed);
}

// One SUBSCRIBE for the key's channel and the turn channel: the second
// confirmation is no wake-up (a spurious one would cost a command per waiter).
TEST_F(RedisStoreTest, AQueuedWatchSleepsThroughItsOwnSubscription) {
  const auto store = open();
  shared_redis().command({"CONFIG", "RESETSTAT"});
  const auto watcher = store->queue()->watch_turn("k", "qa");
  const std::string stats = shared_redis().command({"INFO", "commandstats"});
  EXPECT_NE(stats.find("cmdstat_subscribe:calls=1,"), std::string::npos) << stats;
  EXPECT_EQ(watcher->wait(300ms, -1), WaitResult::timed_out);
}

// A queued SETNX that sets never writes the queue it would leave at once:
// an uncontended lock costs the server TIME, ZRANGE, SETNX and INCR, and a
// woken first waiter no upkeep of its place before it leaves.
TEST_F(RedisStoreTest, AQueuedSetnxThatSetsDoesNotWriteTheQueue) {
  const auto store = open();
  const util::Micros lease(30'000'000);
  const auto writes_of = [](const std::string& stats) {
    int writes = 0;
    for (const char* command : {"cmdstat_zadd:", "cmdstat_zrem:"}) {
      writes += stats.find(command) != std::string::npos ? 1 : 0;
    }
    return writes;
  };
  shared_redis().command({"CONFIG", "RESETSTAT"});
  const auto alone =
      store->queue()->take_or_queue("k", "v-qa", "c", "q", "qa", true, lease, store::k_plain_step);
  ASSERT_EQ(alone.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  const std::string stats = shared_redis().command({"INFO", "commandstats"});
  EXPECT_EQ(writes_of(stats), 0) << stats;
  // One PEXPIRE: the fencing counter's (it expires a week after its last use).
  EXPECT_NE(stats.find("cmdstat_pexpire:calls=1,"), std::string::npos) << stats;

  // Behind it, qb joins; once it is free, qb sets and leaves, with no ZADD or
  // PEXPIRE on the way (its ZREMs only).
  ASSERT_EQ(store->queue()
                ->take_or_queue("k", "v-qb", "c", "q", "qb", true, lease, store::k_plain_step)
                .outcome,
            store::WaitersQueue::QueuedSet::Outcome::held);
  ASSERT_TRUE(store->queue()->release_and_wake("k", "v-qa", store::Fence("c", *alone.fence), "q",
                                               store::k_plain_step));
  shared_redis().command({"CONFIG", "RESETSTAT"});
  ASSERT_EQ(store->queue()
                ->take_or_queue("k", "v-qb", "c", "q", "qb", true, lease, store::k_plain_step)
                .outcome,
            store::WaitersQueue::QueuedSet::Outcome::set);
  const std::string woken = shared_redis().command({"INFO", "commandstats"});
  EXPECT_EQ(woken.find("cmdstat_zadd:"), std::string::npos) << woken;
  EXPECT_NE(woken.find("cmdstat_pexpire:calls=1,"), std::string::npos) << woken;
  EXPECT_NE(woken.find("cmdstat_zrem:calls=2,"), std::string::npos) << woken;
  EXPECT_EQ(shared_redis().command({"EXISTS", "q"}), "0");
}

// Tokens rise across the loss of the counter (FLUSHALL, DEL, a restart
// without persistence): each is at least the server's clock in microseconds.
TEST_F(RedisStoreTest, TokensRiseWhenTheCounterIsLost) {
  const auto store = open();
  const util::Micros before = store->now();
  const auto first = store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(first);
  EXPECT_GE(*first, before.count());  // the clock, not 1
  ASSERT_TRUE(store->compare_and_delete("k", "v", store::Fence("c", *first), store::k_plain_step));
  shared_redis().flushall();
  const auto second = store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(second);
  EXPECT_GT(*second, *first);
  shared_redis().command({"DEL", "c"});
  shared_redis().command({"DEL", "k"});
  const auto third = store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(third);
  EXPECT_GT(*third, *second);
  // Back to back, within one microsecond of the clock: still one more.
  ASSERT_TRUE(store->compare_and_delete("k", "v", store::Fence("c", *third), store::k_plain_step));
  shared_redis().command({"SET", "c", std::to_string(*third + 1'000'000'000)});
  EXPECT_EQ(store->set_if_absent("k", "v", "c", store::k_plain_step).fence, *third + 1'000'000'001);
}

// A holder whose counter was deleted still owns its lock (no acquisition can
// have happened without writing the counter), and the step writes it back.
TEST_F(RedisStoreTest, AnAbsentCounterCountsAsTheHoldersAndIsWrittenBack) {
  const auto store = open();
  const auto token = store->set_if_absent("k", "v", "c", store::k_plain_step).fence;
  ASSERT_TRUE(token);
  shared_redis().command({"DEL", "c"});
  EXPECT_TRUE(
      store->compare_and_set("k", "v", "w", store::Fence("c", *token), store::k_plain_step));
  EXPECT_EQ(store->get("c"), std::to_string(*token));
  shared_redis().command({"DEL", "c"});
  EXPECT_TRUE(store->compare_and_delete("k", "w", store::Fence("c", *token), store::k_plain_step));
  EXPECT_EQ(store->get("c"), std::to_string(*token));
  EXPECT_GT(std::stoll(shared_redis().command({"PTTL", "c"})), 0);
}

// Every key a lock step writes gets an expiry in the same step (SET and
// GETSET drop one): the lock and holder keys for the lock's lifetime, the
// counter for a week.
TEST_F(RedisStoreTest, LockStepsSetExpiriesOnEveryKeyTheyWrite) {
  const auto store = open();
  const store::StepPolicy keep{.lifetime = 100s};
  const auto pttl = [](const char* key) {
    return std::stoll(shared_redis().command({"PTTL", key}));
  };
  const auto token = store->set_if_absent("k", "1", "c", keep).fence;
  ASSERT_TRUE(token);
  EXPECT_GT(pttl("k"), 90'000);
  EXPECT_LE(pttl("k"), 100'000);
  EXPECT_GT(pttl("c"), 6LL * 24 * 3600 * 1000);
  store->set("h", "details", keep);
  EXPECT_GT(pttl("h"), 90'000);
  ASSERT_TRUE(store->compare_and_set("h", "details", "more", std::nullopt, keep));
  EXPECT_GT(pttl("h"), 90'000);
  ASSERT_TRUE(store->compare_and_set("k", "1", "2", store::Fence("c", *token), keep));
  EXPECT_GT(pttl("k"), 90'000);
  const auto swap =
      store->get_and_set("k", "3", store::Takeover{"c", 1'000}, keep);  // "2" expired at 1000
  ASSERT_TRUE(swap.fence);
  EXPECT_GT(pttl("k"), 90'000);
  // The quorum raises a counter: it keeps its week.
  ASSERT_TRUE(store->compare_and_set("c", std::to_string(*swap.fence),
                                     std::to_string(*swap.fence + 5), std::nullopt, keep));
  EXPECT_GT(pttl("c"), 6LL * 24 * 3600 * 1000);
  ASSERT_TRUE(store->compare_and_delete("k", "3", store::Fence("c", *swap.fence + 5), keep));
  EXPECT_EQ(shared_redis().command({"EXISTS", "k"}), "0");
}

// On the server's own clock a takeover is decided by the server's TIME at the
// instant of the step, whatever the caller's estimate said; and a lock that is
// not expired is not written at all (a GETSET and a give-back would show its
// holder another value for a moment).
TEST_F(RedisStoreTest, OnItsOwnClockTheServerDecidesATakeover) {
  const auto store = open();
  const store::StepPolicy own_clock{.own_clock = true};
  const std::int64_t server_now = util::whole_seconds(store->now());
  const std::string live = std::to_string(server_now + 30);
  shared_redis().command({"SET", "k", live});
  shared_redis().command({"CONFIG", "RESETSTAT"});
  const auto swap =
      store->get_and_set("k", "mine", store::Takeover{"c", server_now + 3600}, own_clock);
  EXPECT_EQ(swap.old, live);
  EXPECT_FALSE(swap.fence);
  EXPECT_FALSE(swap.written);
  EXPECT_EQ(store->get("k"), live);
  const std::string stats = shared_redis().command({"INFO", "commandstats"});
  EXPECT_EQ(stats.find("cmdstat_set:"), std::string::npos) << stats;
  // Expired by the server's clock: taken, even if the caller's clock lags.
  const std::string expired = std::to_string(server_now - 2);
  shared_redis().command({"SET", "k", expired});
  const auto taken =
      store->get_and_set("k", "mine", store::Takeover{"c", server_now - 3600}, own_clock);
  EXPECT_EQ(taken.old, expired);
  EXPECT_TRUE(taken.fence);
  EXPECT_EQ(store->get("k"), "mine");
}

TEST_F(RedisStoreTest, SelectedDbIsolatesKeys) {
  auto db3 = open(3);
  auto db0 = open(0);
  db3->set("k", "three", store::k_plain_step);
  EXPECT_EQ(db3->get("k"), "three");
  EXPECT_EQ(db0->get("k"), std::nullopt);
  db0->set("k", "zero", store::k_plain_step);
  EXPECT_EQ(db3->get("k"), "three");
}

TEST_F(RedisStoreTest, WrongTypeIsDataErrorNamingKeyAndUrl) {
  shared_redis().command({"LPUSH", "a list", "x"});
  auto store = open();
  for (const auto& attempt : std::vector<std::function<void()>>{
           [&] { store->get("a list"); },
           [&] { store->get_and_set("a list", "1", std::nullopt, store::k_plain_step); },
           [&] { store->compare_and_delete("a list", "1", std::nullopt, store::k_plain_step); },
           [&] { store->compare_and_set("a list", "1", "2", std::nullopt, store::k_plain_step); },
       }) {
    const auto error = error_from(attempt);
    EXPECT_EQ(error.kind(), ErrorKind::data) << error.what();
    EXPECT_NE(error.subject().find("a list"), std::string::npos) << error.what();
    EXPECT_NE(error.subject().find(store->describe()), std::string::npos) << error.what();
    EXPECT_NE(error.reason().find("WRONGTYPE"), std::string::npos) << error.what();
  }
}

TEST_F(RedisStoreTest, BinarySafeKeysAndValues) {
  auto store = open();
  const std::string key("k\0ey\n with spaces é", 21);
  const std::string value("v\0al\r\nue", 8);
  EXPECT_TRUE(store->set_if_absent(key, value, std::nullopt, store::k_plain_step));
  EXPECT_EQ(store->get(key), value);
  EXPECT_EQ(store->get(std::string("k")), std::nullopt);
  EXPECT_TRUE(
      store->compare_and_set(key, value, std::string("\0", 1), std::nullopt, store::k_plain_step));
  EXPECT_TRUE(
      store->compare_and_delete(key, std::string("\0", 1), std::nullopt, store::k_plain_step));
}

TEST_F(RedisStoreTest, CompareAndDeleteOnlyOnExactValue) {
  auto store = open();
  EXPECT_FALSE(store->compare_and_delete("k", "1", std::nullopt, store::k_plain_step));  // absent
  store->set("k", "100", store::k_plain_step);
  EXPECT_FALSE(store->compare_and_delete("k", "10", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(store->compare_and_delete("k", "1000", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store->get("k"), "100");
  EXPECT_TRUE(store->compare_and_delete("k", "100", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store->get("k"), std::nullopt);
}

TEST_F(RedisStoreTest, CompareAndSetOnlyOnExactValue) {
  auto store = open();
  EXPECT_FALSE(store->compare_and_set("k", "1", "2", std::nullopt,
                                      store::k_plain_step));  // absent: not created
  EXPECT_EQ(store->get("k"), std::nullopt);
  store->set("k", "1", store::k_plain_step);
  EXPECT_FALSE(store->compare_and_set("k", "2", "3", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store->get("k"), "1");
  EXPECT_TRUE(store->compare_and_set("k", "1", "3", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store->get("k"), "3");
}

TEST_F(RedisStoreTest, DelRemovesSeveralKeysAtOnce) {
  auto store = open();
  store->set("a", "1", store::k_plain_step);
  store->set("c", "1", store::k_plain_step);
  EXPECT_EQ(store->del({"a", "b", "c"}), 2u);
  EXPECT_EQ(store->del({}), 0u);
}

TEST_F(RedisStoreTest, NowIsTheServerClock) {
  auto store = open();
  const auto difference = store->now() - util::wall_now();
  EXPECT_LT(std::chrono::abs(difference), 5s);  // same host: the same clock
}

TEST_F(RedisStoreTest, DelWakesWatcher) {
  auto waiter = open();
  auto releaser = open();
  const auto watcher = waiter->watch("lock.k");
  releaser->set("lock.k", "1", store::k_plain_step);
  EXPECT_EQ(releaser->del({"lock.k"}), 1u);
  const auto start = util::mono_now();
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  EXPECT_LT(seconds_since(start), 5.0);
  // The message was consumed: with no new deletion the next wait times out.
  EXPECT_EQ(watcher->wait(50ms, -1), WaitResult::timed_out);
}

TEST_F(RedisStoreTest, DelWakesWatcherInAnotherDbAndOverUnix) {
  auto waiter = open(5);
  RedisStore releaser(unix_url(shared_redis()), ConnectOptions{});
  const std::string key("binary\0key", 10);
  const auto watcher = waiter->watch(key);
  EXPECT_EQ(releaser.del({key}), 0u);  // the wake-up goes out even when nothing was deleted
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
}

TEST_F(RedisStoreTest, WaitWithoutADeletionTimesOut) {
  auto waiter = open();
  auto other = open();
  const auto watcher = waiter->watch("lock.k");
  other->set("lock.k", "2", store::k_plain_step);  // a write, not a deletion
  other->del({"lock.other"});  // another key's channel
  const auto start = util::mono_now();
  EXPECT_EQ(watcher->wait(150ms, -1), WaitResult::timed_out);
  EXPECT_GE(seconds_since(start), 0.14);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(watcher->wait(0us, -1), WaitResult::timed_out);
}

TEST_F(RedisStoreTest, InterruptFdInterruptsWait) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  util::UniqueFd read_end(fds[0]);
  util::UniqueFd write_end(fds[1]);
  auto waiter = open();
  const auto watcher = waiter->watch("lock.k");
  ASSERT_EQ(write(write_end.get(), "x", 1), 1);
  const auto start = util::mono_now();
  EXPECT_EQ(watcher->wait(10s, read_end.get()), WaitResult::interrupted);
  EXPECT_LT(seconds_since(start), 5.0);
  char byte = 0;
  EXPECT_EQ(read(read_end.get(), &byte, 1), 1);  // left unread for the caller
}

TEST(RedisStoreServerGone, CommandsFailAsUnavailableWaitersLookAgain) {
  RedisServer server;
  RedisStore store(tcp_url(server.port()), ConnectOptions{});
  RedisStore unix_store(unix_url(server), ConnectOptions{});
  store.set("k", "v", store::k_plain_step);
  unix_store.set("k", "v", store::k_plain_step);
  const auto watcher = store.watch("k");
  server.stop();
  EXPECT_EQ(error_from([&] { store.get("k"); }).kind(), ErrorKind::unavailable);
  EXPECT_EQ(error_from([&] { unix_store.get("k"); }).kind(), ErrorKind::unavailable);
  // A waiter is not thrown out by a server that went away: it looks again
  // (promptly, not after its timeout), and while the server stays away its
  // waits are poll ticks.
  const auto started = util::mono_now();
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  EXPECT_LT(util::mono_now() - started, util::Micros(5s));
  EXPECT_EQ(watcher->wait(100ms, -1), WaitResult::timed_out);
  const auto error =
      error_from([&] { RedisStore again(tcp_url(server.port()), ConnectOptions{}); });
  EXPECT_EQ(error.kind(), ErrorKind::unavailable);
}

}  // namespace
}  // namespace nxlock::testing
