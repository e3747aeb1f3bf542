// run-locked's metrics: DIR/nxlock_<key>.prom in the Prometheus text format,
// which node_exporter's textfile collector reads.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "util/process_identity.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// One run-locked, as the metrics count it: a busy refusal, a job that has
// just started, or a run of the job that has ended.
struct MetricsEvent {
  bool busy = false;         // refused because the lock was held: nothing below counts
  bool starting = false;     // the job has just started: its run joins nxlock_running, no more
  bool lost = false;         // the lock was lost while the job ran
  bool timed_out = false;    // the job was stopped at --max-runtime
  bool replaced = false;     // a later run replaced it (--replace: not yet; always false)
  int exit_status = 0;       // nxlock's, as cron sees it
  util::Micros started{0};   // Unix time the job started
  util::Micros ended{0};     // Unix time it ended
  util::Micros duration{0};  // how long it ran (monotonic)
  util::Micros waited{0};    // how long nxlock waited for the lock (--jitter's delay not included)
  util::Micros jitter{0};    // the --jitter delay slept before the first try
};

// `key` as a label value: backslash, double quote and newline escaped, as the
// text format requires (other bytes, UTF-8 or not, pass as they are).
std::string metrics_label_value(std::string_view key);

// The file the metrics of `key` go to: "nxlock_<key>.prom", every byte outside
// [A-Za-z0-9_-] written %XX; a key that would make it long is cut, and a
// hash of the whole key after a '~' keeps it unique, well under NAME_MAX
// (with room for the temporary file beside it).
std::string metrics_file_name(std::string_view key);

// The runs of the job on this host that nxlock_running counts: each is an
// entry ("# run PID START BOOT", a comment to the collector) kept in the file
// from its job's start to its end. A run killed before its end leaves its
// entry; the next run's rewrite drops each entry whose process is gone.
struct RunEntries {
  util::ProcessIdentity self;  // this run: added when it starts, removed when it ends
  // Whether another run's process still runs (the real one asks /proc).
  std::function<bool(const util::ProcessIdentity&)> running;
};

// This process, and /proc's word on the others.
RunEntries this_run();

// The file's new content: `old` (absent: none yet) with `event` counted.
// Counters come from `old`; a busy refusal leaves the last run's figures.
std::string updated_metrics(const std::optional<std::string>& old, std::string_view key,
                            const MetricsEvent& event, const RunEntries& runs = this_run());

// Counts `event` in `dir`'s file for `key`, under an flock of
// `dir`/.nxlock_metrics.lock, replaced atomically (util/locked_rewrite.hpp).
// Throws util::Error naming the path when `dir` cannot be written.
void record_metrics(const std::string& dir, std::string_view key, const MetricsEvent& event);

}  // namespace nxlock::run
