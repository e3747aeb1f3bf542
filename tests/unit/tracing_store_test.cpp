// TracingStore: one escaped trace line per store operation, whatever the backend.
#include "store/tracing_store.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/memory_store.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::store {
namespace {

using namespace std::string_literals;

// Collects trace lines while it lives.
class TraceLines {
 public:
  TraceLines() {
    util::set_trace_sink([this](std::string_view line) { m_lines.emplace_back(line); });
  }
  ~TraceLines() { util::set_trace_sink({}); }
  std::vector<std::string> take() { return std::exchange(m_lines, {}); }

 private:
  std::vector<std::string> m_lines;
};

TEST(TracingStore, EachOperationIsOneLine) {
  TraceLines trace;
  TracingStore store(std::make_unique<MemoryStore>([] { return util::Micros(1732000000'000042); }));
  using V = std::vector<std::string>;

  EXPECT_TRUE(store.set_if_absent("k", "1732000061", std::nullopt, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"SETNX k 1732000061 → 1"});
  EXPECT_FALSE(store.set_if_absent("k", "1732000062", std::nullopt, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"SETNX k 1732000062 → 0"});
  EXPECT_EQ(store.get("k"), "1732000061");
  EXPECT_EQ(trace.take(), V{"GET k → 1732000061"});
  EXPECT_EQ(store.get("none"), std::nullopt);
  EXPECT_EQ(trace.take(), V{"GET none → (nil)"});
  EXPECT_EQ(store.get_and_set("k", "1732000070", std::nullopt, store::k_plain_step).old,
            "1732000061");
  EXPECT_EQ(trace.take(), V{"GETSET k 1732000070 → 1732000061"});
  store.set("h", "x", store::k_plain_step);
  EXPECT_EQ(trace.take(), V{"SET h x → OK"});
  EXPECT_TRUE(
      store.compare_and_set("k", "1732000070", "1732000080", std::nullopt, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"SET-IF-EQUAL k 1732000070 1732000080 → 1"});
  EXPECT_FALSE(store.compare_and_delete("k", "1732000070", std::nullopt, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"DEL-IF-EQUAL k 1732000070 → 0"});
  EXPECT_TRUE(store.compare_and_delete("k", "1732000080", std::nullopt, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"DEL-IF-EQUAL k 1732000080 → 1"});
  EXPECT_EQ(store.del({"h", "none"}), 1u);
  EXPECT_EQ(trace.take(), V{"DEL h none → 1"});
  EXPECT_EQ(store.now(), util::Micros(1732000000'000042));
  EXPECT_EQ(trace.take(), V{"TIME → 1732000000.000042"});
  // Not steps: nothing traced.
  auto watcher = store.watch("k");
  EXPECT_EQ(store.describe(), "memory");
  EXPECT_EQ(trace.take(), V{});
}

TEST(TracingStore, KeysAndValuesAreEscapedOntoOneLine) {
  TraceLines trace;
  TracingStore store(std::make_unique<MemoryStore>());
  store.set("a\nb", "v\r\n\xff", store::k_plain_step);
  EXPECT_EQ(trace.take(), std::vector<std::string>{"SET a\\x0ab v\\x0d\\x0a\\xff → OK"});
  EXPECT_EQ(store.get("a\nb"), "v\r\n\xff");
  EXPECT_EQ(trace.take(), std::vector<std::string>{"GET a\\x0ab → v\\x0d\\x0a\\xff"});
}

TEST(TracingStore, AGuardedStepIsTracedWithItsCounter) {
  TraceLines trace;
  TracingStore store(std::make_unique<MemoryStore>());
  using V = std::vector<std::string>;

  EXPECT_EQ(store.set_if_absent("k", "10", "c", store::k_plain_step).fence, 1);
  EXPECT_EQ(trace.take(), V{"SETNX k 10 → 1, INCR c → 1"});
  EXPECT_TRUE(store.compare_and_set("k", "10", "5", Fence{"c", 1}, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"SET-IF-EQUAL k 10 5 if c = 1 → 1"});
  EXPECT_EQ(store.get_and_set("k", "20", Takeover{"c", 6}, store::k_plain_step).fence, 2);
  EXPECT_EQ(trace.take(), V{"GETSET k 20 → 5, INCR c → 2"});
  EXPECT_TRUE(store.compare_and_delete("k", "20", Fence{"c", 2}, store::k_plain_step));
  EXPECT_EQ(trace.take(), V{"DEL-IF-EQUAL k 20 if c = 2 → 1"});
  EXPECT_EQ(store.queue(), nullptr);  // as the memory store: no queue
}

// A store whose every operation fails, as a backend that went away.
class BrokenStore final : public Store, public WaitersQueue {
 public:
  std::string describe() const override { return "broken"; }
  SetIfAbsent set_if_absent(std::string_view, std::string_view, std::optional<std::string_view>,
                            StepPolicy) override {
    fail();
  }
  std::optional<std::string> get(std::string_view) override { fail(); }
  Swap get_and_set(std::string_view, std::string_view, std::optional<Takeover>,
                   StepPolicy) override {
    fail();
  }
  void set(std::string_view, std::string_view, StepPolicy) override { fail(); }
  std::size_t del(const std::vector<std::string>&) override { fail(); }
  bool compare_and_delete(std::string_view, std::string_view, std::optional<Fence>,
                          StepPolicy) override {
    fail();
  }
  bool compare_and_set(std::string_view, std::string_view, std::string_view, std::optional<Fence>,
                       StepPolicy) override {
    fail();
  }
  util::Micros now() override { fail(); }
  std::unique_ptr<Watcher> watch(std::string_view) override { fail(); }
  WaitersQueue* queue() override { return this; }
  QueuedSet take_or_queue(std::string_view, std::string_view, std::string_view, std::string_view,
                          std::string_view, bool, util::Micros, StepPolicy) override {
    fail();
  }
  bool release_and_wake(std::string_view, std::string_view, const Fence&, std::string_view,
                        StepPolicy) override {
    fail();
  }
  void leave(std::string_view, std::string_view, std::string_view) override { fail(); }
  std::unique_ptr<Watcher> watch_turn(std::string_view, std::string) override { fail(); }

 private:
  [[noreturn]] static void fail() {
    throw util::Error(util::ErrorKind::unavailable, "broken", "timed out after 2s");
  }
};

TEST(TracingStore, AFailureIsTracedAndRethrown) {
  TraceLines trace;
  TracingStore store(std::make_unique<BrokenStore>());
  EXPECT_THROW(store.set_if_absent("k", "1", std::nullopt, store::k_plain_step), util::Error);
  EXPECT_EQ(trace.take(), std::vector<std::string>{"SETNX k 1 → failed: timed out after 2s"});
  // The queue's steps too, through the inner store's queue.
  ASSERT_NE(store.queue(), nullptr);
  EXPECT_THROW(store.queue()->leave("k", "q", "qa"), util::Error);
  EXPECT_EQ(trace.take(), std::vector<std::string>{"LEAVE q qa → failed: timed out after 2s"});
}

TEST(TracingStore, SilentWithoutASink) {
  TracingStore store(std::make_unique<MemoryStore>());
  util::set_trace_sink({});
  EXPECT_TRUE(store.set_if_absent("k", "1", std::nullopt,
                                  store::k_plain_step));  // nothing to trace into, and no crash
  EXPECT_EQ(store.get("k"), "1");
}

}  // namespace
}  // namespace nxlock::store
