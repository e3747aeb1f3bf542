// run-locked's metrics: DIR/nxlock_<key>.prom in the Prometheus text format,
// which node_exporter's textfile collector reads.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "util/time.hpp"

namespace nxlock::run {

// One run-locked, as the metrics count it: a busy refusal, or a run of the job.
struct MetricsEvent {
  bool busy = false;         // refused because the lock was held: nothing below counts
  bool lost = false;         // the lock was lost while the job ran
  int exit_status = 0;       // nxlock's, as cron sees it
  util::Micros started{0};   // Unix time the job started
  util::Micros ended{0};     // Unix time it ended
  util::Micros duration{0};  // how long it ran (monotonic)
  util::Micros waited{0};    // how long nxlock waited for the lock
};

// `key` as a label value: backslash, double quote and newline escaped, as the
// text format requires (other bytes, UTF-8 or not, pass as they are).
std::string metrics_label_value(std::string_view key);

// The file the metrics of `key` go to: "nxlock_<key>.prom", every byte outside
// [A-Za-z0-9_-] written %XX; a key that would make it long is cut, and a
// hash of the whole key after a '~' keeps it unique, well under NAME_MAX
// (with room for the temporary file beside it).
std::string metrics_file_name(std::string_view key);

// The file's new content: `old` (absent: none yet) with `event` counted.
// Counters come from `old`; a busy refusal leaves the last run's figures.
std::string updated_metrics(const std::optional<std::string>& old, std::string_view key,
                            const MetricsEvent& event);

// Counts `event` in `dir`'s file for `key`, under an flock of
// `dir`/.nxlock_metrics.lock, replaced atomically (util/locked_rewrite.hpp).
// Throws util::Error naming the path when `dir` cannot be written.
void record_metrics(const std::string& dir, std::string_view key, const MetricsEvent& event);

}  // namespace nxlock::run
