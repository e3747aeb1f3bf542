// run-locked's metrics file: label escaping, file names, and counters carried over.
#include "run/metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace nxlock::run {
namespace {

using namespace std::string_literals;

TEST(MetricsLabel, EscapesWhatTheTextFormatRequires) {
  EXPECT_EQ(metrics_label_value("job"), "job");
  EXPECT_EQ(metrics_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(metrics_label_value("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(metrics_label_value("two\nlines"), "two\\nlines");
  EXPECT_EQ(metrics_label_value("café\ttab"), "café\ttab");  // the rest passes as it is
}

TEST(MetricsFileName, KeepsSafeBytesAndEncodesTheRest) {
  EXPECT_EQ(metrics_file_name("nightly-backup_2"), "nxlock_nightly-backup_2.prom");
  EXPECT_EQ(metrics_file_name("a/b"), "nxlock_a%2Fb.prom");
  EXPECT_EQ(metrics_file_name("."), "nxlock_%2E.prom");
  EXPECT_EQ(metrics_file_name("a\nb\"c"), "nxlock_a%0Ab%22c.prom");
  EXPECT_EQ(metrics_file_name("\xff\x00"s), "nxlock_%FF%00.prom");
  EXPECT_EQ(metrics_file_name("%41"), "nxlock_%2541.prom");  // never the same as "A"
}

TEST(MetricsFileName, LongKeysAreCutWithAHashAndStayUnique) {
  const std::string long_a(400, 'a');
  const std::string name = metrics_file_name(long_a);
  EXPECT_LE(name.size(), 200U);
  EXPECT_NE(name.find('~'), std::string::npos);
  EXPECT_NE(metrics_file_name(long_a + "b"), metrics_file_name(long_a + "c"));
  EXPECT_EQ(metrics_file_name(long_a), name);  // stable
  // Cut on a whole escape, never in the middle of one.
  const std::string slashes = metrics_file_name(std::string(300, '/'));
  EXPECT_LE(slashes.size(), 200U);
  const std::string body = slashes.substr(7, slashes.find('~') - 7);
  EXPECT_EQ(body.size() % 3, 0U);
  // A key whose encoding just fits is not cut.
  EXPECT_EQ(metrics_file_name(std::string(160, 'k')).find('~'), std::string::npos);
  EXPECT_NE(metrics_file_name(std::string(161, 'k')).find('~'), std::string::npos);
}

TEST(MetricsContent, CountsCarryOverAndBusyKeepsTheLastRun) {
  MetricsEvent ran;
  ran.exit_status = 3;
  ran.started = util::Micros(1'700'000'000'000'000);
  ran.ended = util::Micros(1'700'000'002'500'000);
  ran.duration = util::Micros(2'500'000);
  ran.waited = util::Micros(250'000);
  const std::string first = updated_metrics(std::nullopt, "k\"ey", ran);
  EXPECT_NE(first.find("# TYPE nxlock_runs_total counter\n"), std::string::npos);
  EXPECT_NE(first.find("nxlock_runs_total{key=\"k\\\"ey\"} 1\n"), std::string::npos);
  EXPECT_NE(first.find("nxlock_last_duration_seconds{key=\"k\\\"ey\"} 2.5\n"), std::string::npos);
  EXPECT_NE(first.find("nxlock_last_start_time_seconds{key=\"k\\\"ey\"} 1700000000\n"),
            std::string::npos);

  MetricsEvent busy;
  busy.busy = true;
  const std::string second = updated_metrics(first, "k\"ey", busy);
  EXPECT_NE(second.find("nxlock_runs_total{key=\"k\\\"ey\"} 1\n"), std::string::npos);
  EXPECT_NE(second.find("nxlock_busy_total{key=\"k\\\"ey\"} 1\n"), std::string::npos);
  EXPECT_NE(second.find("nxlock_last_exit_status{key=\"k\\\"ey\"} 3\n"), std::string::npos);

  ran.lost = true;
  const std::string third = updated_metrics(second, "k\"ey", ran);
  EXPECT_NE(third.find("nxlock_runs_total{key=\"k\\\"ey\"} 2\n"), std::string::npos);
  EXPECT_NE(third.find("nxlock_lost_total{key=\"k\\\"ey\"} 1\n"), std::string::npos);
}

TEST(MetricsContent, EachRunIsAnEntryAndAGoneOneIsDroppedByTheNext) {
  const util::ProcessIdentity one{101, 5, "boot"};
  const util::ProcessIdentity two{102, 6, "boot"};
  std::vector<util::ProcessIdentity> alive{one, two};
  const auto as = [&alive](const util::ProcessIdentity& self) {
    return RunEntries{self, [&alive](const util::ProcessIdentity& run) {
                        return std::find(alive.begin(), alive.end(), run) != alive.end();
                      }};
  };
  MetricsEvent starting;
  starting.starting = true;
  std::string text = updated_metrics(std::nullopt, "k", starting, as(one));
  text = updated_metrics(text, "k", starting, as(two));
  EXPECT_NE(text.find("nxlock_running{key=\"k\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("\n# run 101 5 boot\n"), std::string::npos);
  EXPECT_NE(text.find("nxlock_runs_total{key=\"k\"} 0\n"), std::string::npos);  // not yet

  // One is killed: its entry stays until a rewrite finds it gone.
  alive = {two};
  MetricsEvent ended;
  ended.exit_status = 124;
  ended.timed_out = true;
  text = updated_metrics(text, "k", ended, as(two));
  EXPECT_NE(text.find("nxlock_running{key=\"k\"} 0\n"), std::string::npos);
  EXPECT_EQ(text.find("# run "), std::string::npos);
  EXPECT_NE(text.find("nxlock_failures_total{key=\"k\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("nxlock_max_runtime_stops_total{key=\"k\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("nxlock_replaced_total{key=\"k\"} 0\n"), std::string::npos);
}

TEST(MetricsContent, GarbageStartsTheCountsAgain) {
  const std::string text =
      updated_metrics("nonsense\nnxlock_runs_total{} x\n"s, "k", MetricsEvent{});
  EXPECT_NE(text.find("nxlock_runs_total{key=\"k\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace nxlock::run
