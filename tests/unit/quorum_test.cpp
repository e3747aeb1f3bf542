// QuorumLock: the majority and validity arithmetic, and the quorum over in-memory servers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/keys.hpp"
#include "lock/quorum/quorum.hpp"
#include "store/memory_store.hpp"
#include "util/error.hpp"

namespace nxlock {
namespace {

using lock::Verdict;
using util::Micros;

TEST(QuorumToken, IsTheHighestThatAMajorityCarries) {
  // A server that took the lock after the majority issued a higher token no holder got.
  EXPECT_EQ(lock::quorum_token({5, 7, 5}, 3), 5);
  EXPECT_EQ(lock::quorum_token({3, 8, 8, 1, 2}, 5), 3);
  EXPECT_EQ(lock::quorum_token({4, 4, 4}, 3), 4);
  // Fewer answered than a majority: the lowest of them, never a minority's higher one.
  EXPECT_EQ(lock::quorum_token({9, 6}, 5), 6);
  EXPECT_EQ(lock::quorum_token({}, 3), std::nullopt);
}

TEST(QuorumArithmetic, MajorityIsMoreThanHalf) {
  EXPECT_EQ(lock::majority_of(1), 1u);
  EXPECT_EQ(lock::majority_of(2), 2u);
  EXPECT_EQ(lock::majority_of(3), 2u);
  EXPECT_EQ(lock::majority_of(4), 3u);
  EXPECT_EQ(lock::majority_of(5), 3u);
  EXPECT_EQ(lock::majority_of(7), 4u);
}

TEST(QuorumArithmetic, DriftIsTwoMillisecondsAndOnePercentOfTheTtl) {
  EXPECT_EQ(lock::drift_margin(1), Micros(12'000));
  EXPECT_EQ(lock::drift_margin(60), Micros(602'000));
  EXPECT_EQ(lock::drift_margin(3600), Micros(36'002'000));
}

TEST(QuorumArithmetic, ValidityIsTtlMinusDriftFromTheClockReading) {
  const Micros started(5'000'000);
  EXPECT_EQ(lock::validity_end(started, 60), started + Micros(60'000'000 - 602'000));
}

TEST(QuorumArithmetic, HeldOnlyByAMajorityInsideTheWindow) {
  const Micros started(1'000'000);
  const Micros end = lock::validity_end(started, 10);
  EXPECT_TRUE(lock::quorum_holds(2, 3, started, started + Micros(1'000), 10));
  EXPECT_TRUE(lock::quorum_holds(3, 3, started, end - Micros(1), 10));
  // The acquisition took the whole window: nothing is left of it.
  EXPECT_FALSE(lock::quorum_holds(3, 3, started, end, 10));
  EXPECT_FALSE(lock::quorum_holds(1, 3, started, started, 10));
  EXPECT_FALSE(lock::quorum_holds(2, 4, started, started, 10));
  EXPECT_TRUE(lock::quorum_holds(3, 4, started, started, 10));
  EXPECT_TRUE(lock::quorum_holds(3, 5, started, started, 10));
}

// One server: a MemoryStore that outlives the connections QuorumLock opens to
// it, and can be taken down (every operation then fails as a dead server does).
struct FakeServer {
  store::MemoryStore data;
  // Read by the quorum's workers while a test changes them.
  std::atomic<bool> down{false};
  std::atomic<Micros> delay{Micros(0)};            // before every operation: a slow server
  std::atomic<bool> refuse_counter_writes{false};  // compare_and_set of the fencing counter fails
  std::atomic<bool> stopped{false};  // every operation waits while set (20 s at most): SIGSTOP
};

class Connection final : public store::Store {
 public:
  explicit Connection(FakeServer& server) : m_server(server) {}
  std::string describe() const override { return "fake"; }
  store::SetIfAbsent set_if_absent(std::string_view k, std::string_view v,
                                   std::optional<std::string_view> c,
                                   store::StepPolicy p) override {
    check();
    return m_server.data.set_if_absent(k, v, c, p);
  }
  std::optional<std::string> get(std::string_view k) override {
    check();
    return m_server.data.get(k);
  }
  store::Swap get_and_set(std::string_view k, std::string_view v, std::optional<store::Takeover> t,
                          store::StepPolicy p) override {
    check();
    return m_server.data.get_and_set(k, v, t, p);
  }
  void set(std::string_view k, std::string_view v, store::StepPolicy p) override {
    check();
    m_server.data.set(k, v, p);
  }
  std::size_t del(const std::vector<std::string>& keys) override {
    check();
    return m_server.data.del(keys);
  }
  bool compare_and_delete(std::string_view k, std::string_view e, std::optional<store::Fence> f,
                          store::StepPolicy p) override {
    check();
    return m_server.data.compare_and_delete(k, e, f, p);
  }
  bool compare_and_set(std::string_view k, std::string_view e, std::string_view v,
                       std::optional<store::Fence> f, store::StepPolicy p) override {
    check();
    if (m_server.refuse_counter_writes && k == store::fence_key("k")) {
      return false;
    }
    return m_server.data.compare_and_set(k, e, v, f, p);
  }
  Micros now() override { return util::wall_now(); }
  std::unique_ptr<store::Watcher> watch(std::string_view k) override {
    check();
    return m_server.data.watch(k);
  }

 private:
  void check() {
    for (int i = 0; m_server.stopped && i < 20'000; ++i) {
      std::this_thread::sleep_for(Micros(1'000));
    }
    if (const Micros delay = m_server.delay; delay > Micros(0)) {
      std::this_thread::sleep_for(delay);
    }
    if (m_server.down) {
      throw util::Error(util::ErrorKind::unavailable, "fake", "connection refused");
    }
  }
  FakeServer& m_server;
};

// A clock stopped at one reading: every value computed from it is the same, as the
// values of takers in the same second are.
class StoppedClock final : public lock::Clock {
 public:
  Micros now() override { return m_reading; }

 private:
  Micros m_reading = util::wall_now();
};

class QuorumTest : public ::testing::Test {
 protected:
  QuorumTest() : servers(3) {}

  // With `with` for its clock, or the host's.
  std::unique_ptr<lock::QuorumLock> make_lock(lock::Clock* with = nullptr) {
    std::vector<lock::QuorumServer> specs;
    for (std::size_t i = 0; i < servers.size(); ++i) {
      FakeServer* server = &servers[i];
      specs.push_back({"fake" + std::to_string(i), [server]() -> std::unique_ptr<store::Store> {
                         if (server->down) {
                           throw util::Error(util::ErrorKind::unavailable, "fake", "refused");
                         }
                         return std::make_unique<Connection>(*server);
                       }});
    }
    auto quorum = std::make_unique<lock::QuorumLock>(std::move(specs), with ? *with : clock, "k");
    last = quorum.get();
    return quorum;
  }

  // A step returns once a majority decided it: the last quorum's servers finish
  // their part before the test reads them.
  void wait_for_workers() {
    if (last) {
      EXPECT_TRUE(last->wait_for_workers(Micros(10'000'000)));
    }
  }

  std::vector<std::optional<std::string>> values() {
    wait_for_workers();
    std::vector<std::optional<std::string>> found;
    for (auto& server : servers) {
      found.push_back(server.data.get("k"));
    }
    return found;
  }

  lock::AcquireResult try_once(lock::QuorumLock& quorum, std::int64_t ttl = 60) {
    lock::WaitPolicy policy;
    policy.wait_for = Micros(0);
    auto result = quorum.acquire(ttl, policy);
    // A success is decided by a majority: let the rest finish their part before
    // the test changes the servers' data (unless one is stopped on purpose).
    if (std::none_of(servers.begin(), servers.end(), [](auto& s) { return s.stopped.load(); })) {
      wait_for_workers();
    }
    return result;
  }

  std::string live_value() const {
    return std::to_string(util::whole_seconds(util::wall_now()) + 60);
  }

  std::vector<FakeServer> servers;
  lock::LocalClock clock;
  lock::QuorumLock* last = nullptr;  // the last make_lock()'s, while it lives
};

TEST_F(QuorumTest, EveryServerGetsTheSameValue) {
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  EXPECT_EQ(values(), std::vector<std::optional<std::string>>(3, result.value));
  // Held at least ttl minus the drift margin after the round began.
  EXPECT_LE(result.valid_from, util::mono_now() - lock::drift_margin(60));
}

TEST_F(QuorumTest, AMajorityHeldElsewhereIsBusyAndOursIsUndone) {
  const std::string other = live_value();
  servers[0].data.set("k", other, store::k_plain_step);
  servers[2].data.set("k", other, store::k_plain_step);
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  EXPECT_EQ(result.outcome, lock::AcquireResult::Outcome::busy);
  EXPECT_EQ(std::to_string(result.held_until), other);
  EXPECT_EQ(values(), (std::vector<std::optional<std::string>>{other, std::nullopt, other}));
}

TEST_F(QuorumTest, AMinorityHeldElsewhereDoesNotBlock) {
  const std::string other = live_value();
  servers[1].data.set("k", other, store::k_plain_step);
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  EXPECT_EQ(values(), (std::vector<std::optional<std::string>>{result.value, other, result.value}));
}

TEST_F(QuorumTest, ASplitWithNoMajorityHolderIsTriedAgainThenBusyAndLeavesNothing) {
  const std::string first = live_value();
  const std::string second = std::to_string(std::stoll(first) + 1);
  servers[0].data.set("k", first, store::k_plain_step);
  servers[2].data.set("k", second, store::k_plain_step);
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  EXPECT_EQ(result.outcome, lock::AcquireResult::Outcome::busy);
  EXPECT_EQ(values(), (std::vector<std::optional<std::string>>{first, std::nullopt, second}));
}

TEST_F(QuorumTest, FewerThanAMajorityAnsweringIsUnavailable) {
  servers[0].down = true;
  servers[1].down = true;
  auto quorum = make_lock();
  try {
    try_once(*quorum);
    FAIL() << "expected unavailable";
  } catch (const util::Error& e) {
    EXPECT_EQ(e.kind(), util::ErrorKind::unavailable);
    EXPECT_NE(std::string(e.what()).find("only 1 of 3 servers answered (a majority is 2)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(values()[2], std::nullopt) << "undone on the one that answered";
}

TEST_F(QuorumTest, OneServerDownStillLocksRenewsAndReleases) {
  servers[1].down = true;
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  const lock::Renewed renewed = quorum->renew(result.value, 120);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(values()[0], renewed.value);
  EXPECT_EQ(values()[2], renewed.value);
  EXPECT_EQ(quorum->release(renewed.value), Verdict::done);
  EXPECT_EQ(values(), std::vector<std::optional<std::string>>(3, std::nullopt));
}

TEST_F(QuorumTest, ARenewalThatLosesTheMajorityIsUndoneOnTheMinority) {
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  const std::string other = std::to_string(std::stoll(result.value) + 7);
  servers[0].data.set("k", other, store::k_plain_step);
  servers[1].data.set("k", other, store::k_plain_step);
  EXPECT_EQ(quorum->renew(result.value, 60).verdict, Verdict::taken_over);
  EXPECT_EQ(values(), (std::vector<std::optional<std::string>>{other, other, std::nullopt}));
}

TEST_F(QuorumTest, AServerOurAcquisitionDidNotTakeIsNotOursThoughItHoldsOurValue) {
  // The third server is held by another when we take the first two; then a waiter
  // takes it in the same second, so with our very value (a whole second, now +
  // ttl + 1). Renewed and released by value alone there, its lock was taken for
  // ours and deleted while the waiter's next round could take a majority.
  StoppedClock stopped;
  servers[2].data.set("k", std::to_string(util::whole_seconds(stopped.now()) + 30),
                      store::k_plain_step);
  auto quorum = make_lock(&stopped);
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  servers[2].data.del({"k"});
  Connection connection(servers[2]);
  lock::Lock waiter(connection, stopped, "k");
  const auto taken = waiter.try_once(60);
  ASSERT_EQ(taken.outcome, lock::Attempt::Outcome::acquired);
  ASSERT_EQ(taken.value, result.value);
  const lock::Renewed renewed = quorum->renew(result.value, 60);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(quorum->release(renewed.value), Verdict::done);
  EXPECT_EQ(values(), (std::vector<std::optional<std::string>>{std::nullopt, std::nullopt,
                                                               taken.value}))
      << "the waiter's lock on the third server is left alone";
  EXPECT_EQ(waiter.renew(taken.value, 60).verdict, Verdict::done) << "still the waiter's";
}

TEST_F(QuorumTest, ALostRenewalLeavesAServerOurAcquisitionDidNotTake) {
  // As above, and the renewal then finds the first two taken over: it neither
  // counts the third as renewed nor undoes the waiter's lock there.
  StoppedClock stopped;
  servers[2].data.set("k", std::to_string(util::whole_seconds(stopped.now()) + 30),
                      store::k_plain_step);
  auto quorum = make_lock(&stopped);
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  servers[2].data.del({"k"});
  Connection connection(servers[2]);
  lock::Lock waiter(connection, stopped, "k");
  ASSERT_EQ(waiter.try_once(60).value, result.value);
  const std::string other = std::to_string(std::stoll(result.value) + 7);
  servers[0].data.set("k", other, store::k_plain_step);
  servers[1].data.set("k", other, store::k_plain_step);
  EXPECT_EQ(quorum->renew(result.value, 60).verdict, Verdict::taken_over);
  EXPECT_EQ(values(), (std::vector<std::optional<std::string>>{other, other, result.value}));
}

TEST_F(QuorumTest, AReleaseTheMissingServersCouldDecideIsUnavailable) {
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  servers[0].data.set("k", std::to_string(std::stoll(result.value) + 7), store::k_plain_step);
  servers[1].down = true;
  // Released on 1, taken over on 1, 1 silent: it may or may not have been ours.
  EXPECT_THROW(quorum->release(result.value), util::Error);
  EXPECT_EQ(values()[2], std::nullopt);
}

TEST_F(QuorumTest, StatusIsTheMajorityView) {
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  servers[2].data.del({"k"});
  auto status = quorum->status();
  EXPECT_EQ(status.state, lock::Status::State::held);
  EXPECT_EQ(status.value, result.value);
  const auto& views = status.servers;
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[0].state, lock::ServerView::State::held);
  EXPECT_EQ(views[2].state, lock::ServerView::State::free);
  servers[1].data.del({"k"});
  EXPECT_EQ(quorum->status().state, lock::Status::State::free) << "held on one of three";
}

TEST_F(QuorumTest, AnAcquisitionSlowerThanTheWindowIsNotHeldAndIsUndone) {
  // ttl 1: a window of 1 s - 12 ms. Each server's SETNX answers after 1.1 s (at
  // once, all together): every server took it, but the window has closed.
  for (auto& server : servers) {
    server.delay = Micros(1'100'000);
  }
  auto quorum = make_lock();
  const auto round = quorum->try_round(1);
  EXPECT_FALSE(round.acquired);
  EXPECT_GE(round.acquired_on, 2u) << "a majority took it, too late";
  for (auto& server : servers) {
    server.delay = Micros(0);
  }
  EXPECT_EQ(values(), std::vector<std::optional<std::string>>(3, std::nullopt));
}

TEST_F(QuorumTest, TheTokenIsTheHighestOfTheDecidingServersAndIsRaisedOnTheOthers) {
  // The third server is stopped: the first two decide, and their counters differ.
  const std::string counter = store::fence_key("k");
  servers[0].data.set(counter, "3", store::k_plain_step);
  servers[1].data.set(counter, "40", store::k_plain_step);
  servers[2].stopped = true;
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  EXPECT_EQ(result.fence, 41);
  EXPECT_EQ(quorum->fence(), 41);
  EXPECT_EQ(servers[0].data.get(counter), "41") << "raised";
  EXPECT_EQ(servers[1].data.get(counter), "41");
  // The raised counters are ours: renew and release (fenced by them) still work.
  const lock::Renewed renewed = quorum->renew(result.value, 120);
  EXPECT_EQ(renewed.verdict, Verdict::done);
  EXPECT_EQ(servers[0].data.get("k"), renewed.value);
  EXPECT_EQ(quorum->status().fence, 41);
  EXPECT_EQ(quorum->release(renewed.value), Verdict::done);
  servers[2].stopped = false;
  const auto found = values();
  EXPECT_EQ(found[0], std::nullopt);
  EXPECT_EQ(found[1], std::nullopt);
}

TEST_F(QuorumTest, TokensIncreaseOverQuorumsThatShareOnlyOneServer) {
  // Each acquisition reaches only two servers, a different pair each time: the
  // pairs share one server, which carries the order from one to the next.
  std::int64_t previous = 0;
  for (int run = 0; run < 9; ++run) {
    for (std::size_t i = 0; i < servers.size(); ++i) {
      servers[i].down = static_cast<int>(i) == run % 3;
    }
    auto quorum = make_lock();
    const auto result = try_once(*quorum);
    ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired) << run;
    EXPECT_GT(result.fence, previous) << run;
    previous = result.fence;
    EXPECT_EQ(quorum->release(result.value), Verdict::done);
  }
}

TEST_F(QuorumTest, AMajorityOfCountersThatCannotBeRaisedFailsTheAcquisition) {
  // The third server is stopped, so the first two decide; the second lags behind
  // the first and refuses the raise (as if another acquisition had moved its
  // counter): the token is held on one of three.
  servers[0].data.set(store::fence_key("k"), "50", store::k_plain_step);
  servers[1].refuse_counter_writes = true;
  servers[2].stopped = true;
  auto quorum = make_lock();
  const auto result = try_once(*quorum);
  EXPECT_EQ(result.outcome, lock::AcquireResult::Outcome::busy);
  EXPECT_EQ(quorum->fence(), 0);
  EXPECT_EQ(servers[0].data.get("k"), std::nullopt) << "undone";
  EXPECT_EQ(servers[1].data.get("k"), std::nullopt) << "undone";
  servers[1].refuse_counter_writes = false;
  const auto again = try_once(*quorum);
  ASSERT_EQ(again.outcome, lock::AcquireResult::Outcome::acquired);
  EXPECT_GT(again.fence, 50);
  servers[2].stopped = false;
  wait_for_workers();
}

TEST_F(QuorumTest, ARaiseAfterAnotherAcquisitionThereIsRefused) {
  // Lock::raise_fence moves the counter only while it holds our own token.
  FakeServer server;
  Connection connection(server);
  lock::LocalClock local;
  lock::Lock ours(connection, local, "k");
  ASSERT_EQ(ours.try_once(60).outcome, lock::Attempt::Outcome::acquired);
  EXPECT_EQ(ours.fence(), 1);
  EXPECT_TRUE(ours.raise_fence(5));
  EXPECT_EQ(ours.fence(), 5);
  EXPECT_EQ(server.data.get(store::fence_key("k")), "5");
  server.data.set(store::fence_key("k"), "6", store::k_plain_step);  // another acquisition came
  EXPECT_FALSE(ours.raise_fence(9));
  EXPECT_EQ(server.data.get(store::fence_key("k")), "6");
  EXPECT_EQ(ours.fence(), 5);
}

TEST_F(QuorumTest, AServerThatTookTheLockLateLetsGoOfItBeforeTheReleaseReturns) {
  // Server 1 answers late: the other two decide the acquisition, and its part
  // (the take there, then the holder record) is still queued when the release
  // comes, two jobs behind. The release is queued there too, and waited for.
  servers[1].delay = Micros(10'000);
  auto quorum = make_lock();
  lock::WaitPolicy policy;
  policy.wait_for = Micros(0);
  const auto result = quorum->acquire(60, policy);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  lock::Holder holder;
  holder.value = result.value;
  holder.host = "h";
  holder.pid = 42;
  quorum->record_holder(holder);
  EXPECT_EQ(quorum->release(result.value), Verdict::done);
  // When it returns, server 1 has taken the lock (its counter issued a token)
  // and let go of it, holder record and all.
  EXPECT_NE(servers[1].data.get(store::fence_key("k")), std::nullopt) << "not taken there yet";
  EXPECT_EQ(servers[1].data.get("k"), std::nullopt);
  EXPECT_EQ(servers[1].data.get(store::holder_key("k")), std::nullopt);
  EXPECT_EQ(values(), std::vector<std::optional<std::string>>(3, std::nullopt));
  for (auto& server : servers) {
    EXPECT_EQ(server.data.get(store::holder_key("k")), std::nullopt);
  }
}

TEST_F(QuorumTest, AStoppedServerHoldsUpNoStep) {
  // The stopped server answers nothing for 20 s: every step is decided by the
  // other two, and its pending requests wait on its own queue.
  servers[1].stopped = true;
  auto quorum = make_lock();
  const Micros started = util::mono_now();
  const auto result = try_once(*quorum);
  ASSERT_EQ(result.outcome, lock::AcquireResult::Outcome::acquired);
  EXPECT_GT(result.fence, 0);
  std::string value = result.value;
  for (int i = 0; i < 4; ++i) {
    const lock::Renewed renewed = quorum->renew(value, 60 + i);
    ASSERT_EQ(renewed.verdict, Verdict::done) << i;
    value = renewed.value;
  }
  EXPECT_EQ(quorum->status().state, lock::Status::State::held);
  EXPECT_EQ(quorum->release(value), Verdict::done);
  EXPECT_LT(util::mono_now() - started, Micros(10'000'000)) << "held up by the stopped server";
  servers[1].stopped = false;
  const auto found = values();  // once its queue has drained
  EXPECT_EQ(found[0], std::nullopt);
  EXPECT_EQ(found[2], std::nullopt);
}

}  // namespace
}  // namespace nxlock
