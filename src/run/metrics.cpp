// run-locked's metrics file: names, escaping, and the counters carried over.
#include "run/metrics.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <vector>

#include "util/locked_rewrite.hpp"

namespace nxlock::run {

namespace {

// The encoded key is cut beyond this, leaving the whole name (prefix, key,
// '~', hash, ".prom") near 190 bytes, and its temporary file (".", the name,
// ".<pid>.tmp") under NAME_MAX (255).
constexpr std::size_t k_max_encoded_key = 160;

struct Metric {
  const char* name;
  const char* type;
  const char* help;
};

// Every metric, in the file's order.
constexpr Metric k_metrics[] = {
    {"nxlock_runs_total", "counter", "Runs of the job under the lock."},
    {"nxlock_busy_total", "counter", "Refusals because the lock was held (busy exit status)."},
    {"nxlock_lost_total", "counter", "Runs that lost the lock while the job ran."},
    {"nxlock_failures_total", "counter",
     "Runs whose exit status was not 0 (runs that lost the lock or ran past --max-runtime "
     "included)."},
    {"nxlock_max_runtime_stops_total", "counter", "Runs stopped at --max-runtime."},
    {"nxlock_replaced_total", "counter", "Runs stopped because a later run replaced them."},
    {"nxlock_running", "gauge",
     "Runs of the job on this host running now (each shared holder and slot counts); a run "
     "killed by SIGKILL counts until the next run of the key on this host."},
    {"nxlock_last_start_time_seconds", "gauge", "Unix time the last run's job started."},
    {"nxlock_last_end_time_seconds", "gauge", "Unix time the last run's job ended."},
    {"nxlock_last_duration_seconds", "gauge", "Seconds the last run's job ran."},
    {"nxlock_last_exit_status", "gauge", "Exit status of the last run of nxlock run-locked."},
    {"nxlock_last_wait_seconds", "gauge", "Seconds the last run waited for the lock."},
    {"nxlock_last_jitter_seconds", "gauge",
     "Seconds the last run slept for --jitter before its first try (0 without it)."},
};

bool kept_as_is(unsigned char byte) {
  return (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
         (byte >= '0' && byte <= '9') || byte == '_' || byte == '-';
}

std::string encoded(unsigned char byte) {
  constexpr char k_hex[] = "0123456789ABCDEF";
  if (kept_as_is(byte)) {
    return std::string(1, static_cast<char>(byte));
  }
  return {'%', k_hex[byte >> 4], k_hex[byte & 0xF]};
}

// FNV-1a, 64 bits: stable across builds and hosts, which the file name must be.
std::uint64_t name_hash(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }
  return hash;
}

// Each metric's value as the old file has it, by name. A file we did not
// write, or garbage, gives what it gives: the counters start again from there.
std::map<std::string, std::string, std::less<>> values_of(const std::string& text) {
  std::map<std::string, std::string, std::less<>> values;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.empty() || line.front() == '#') {
      continue;
    }
    // name{key="…"} value: the value is the last word (no timestamp is written).
    const std::size_t name_end = line.find_first_of("{ ");
    const std::size_t value_start = line.rfind(' ');
    if (name_end != std::string_view::npos && value_start != std::string_view::npos) {
      values[std::string(line.substr(0, name_end))] = std::string(line.substr(value_start + 1));
    }
  }
  return values;
}

// The runs that nxlock_running counts, as the file's "# run PID START BOOT"
// lines name them; a line of another form is dropped.
constexpr std::string_view k_run_entry = "# run ";

std::vector<util::ProcessIdentity> runs_of(const std::string& text) {
  std::vector<util::ProcessIdentity> runs;
  std::size_t start = 0;
  while ((start = text.find(k_run_entry, start)) != std::string::npos) {
    if (start != 0 && text[start - 1] != '\n') {
      start += k_run_entry.size();
      continue;
    }
    start += k_run_entry.size();
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    util::ProcessIdentity run;
    const char* at = line.data();
    const char* last = line.data() + line.size();
    const auto pid = std::from_chars(at, last, run.pid);
    if (pid.ec != std::errc() || pid.ptr == last || *pid.ptr != ' ') {
      continue;
    }
    const auto tick = std::from_chars(pid.ptr + 1, last, run.start);
    if (tick.ec != std::errc() || tick.ptr == last || *tick.ptr != ' ') {
      continue;
    }
    run.boot.assign(tick.ptr + 1, last);
    runs.push_back(std::move(run));
  }
  return runs;
}

std::int64_t counter(const std::map<std::string, std::string, std::less<>>& values,
                     std::string_view name) {
  std::int64_t count = 0;
  if (const auto found = values.find(name); found != values.end()) {
    const std::string& text = found->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (ec != std::errc() || end != text.data() + text.size() || count < 0) {
      count = 0;
    }
  }
  return count;
}

}  // namespace

std::string metrics_label_value(std::string_view key) {
  std::string text;
  for (const char c : key) {
    switch (c) {
      case '\\':
        text += "\\\\";
        break;
      case '"':
        text += "\\\"";
        break;
      case '\n':
        text += "\\n";
        break;
      default:
        text += c;
    }
  }
  return text;
}

std::string metrics_file_name(std::string_view key) {
  std::string name = "nxlock_";
  std::string body;
  for (const char c : key) {
    body += encoded(static_cast<unsigned char>(c));
  }
  if (body.size() > k_max_encoded_key) {
    // '~' is never kept as is: a cut name cannot be an uncut one.
    body.clear();
    for (const char c : key) {
      const std::string piece = encoded(static_cast<unsigned char>(c));
      if (body.size() + piece.size() > k_max_encoded_key - 17) {
        break;
      }
      body += piece;
    }
    char hash[17];
    const std::uint64_t value = name_hash(key);
    for (int i = 0; i < 16; ++i) {
      hash[i] = "0123456789abcdef"[(value >> (60 - 4 * i)) & 0xF];
    }
    hash[16] = '\0';
    body += '~';
    body += hash;
  }
  return name + body + ".prom";
}

RunEntries this_run() {
  RunEntries runs;
  runs.self = util::identify_process(::getpid()).value_or(util::ProcessIdentity{});
  runs.running = [](const util::ProcessIdentity& run) {
    // Stopped or traced, it still runs its job: only a pid now of another
    // process, or of none, ends a run.
    return util::identify_process(run.pid) == run;
  };
  return runs;
}

std::string updated_metrics(const std::optional<std::string>& old, std::string_view key,
                            const MetricsEvent& event, const RunEntries& runs) {
  auto values = old ? values_of(*old) : decltype(values_of("")){};
  // This run joins the runs now as its job starts and leaves them as it ends;
  // any other run whose process is gone was killed before its end: dropped.
  std::vector<util::ProcessIdentity> now;
  for (auto& run : old ? runs_of(*old) : std::vector<util::ProcessIdentity>{}) {
    if (run != runs.self && runs.running(run)) {
      now.push_back(std::move(run));
    }
  }
  if (event.starting) {
    now.push_back(runs.self);
  }
  values["nxlock_running"] = std::to_string(now.size());

  const bool ended = !event.busy && !event.starting;
  const auto count = [&](std::string_view name, bool happened) {
    values[std::string(name)] = std::to_string(counter(values, name) + (happened ? 1 : 0));
  };
  count("nxlock_runs_total", ended);
  count("nxlock_busy_total", event.busy);
  count("nxlock_lost_total", ended && event.lost);
  count("nxlock_failures_total", ended && event.exit_status != 0);
  count("nxlock_max_runtime_stops_total", ended && event.timed_out);
  count("nxlock_replaced_total", ended && event.replaced);
  if (ended) {
    values["nxlock_last_start_time_seconds"] = util::decimal_seconds(event.started);
    values["nxlock_last_end_time_seconds"] = util::decimal_seconds(event.ended);
    values["nxlock_last_duration_seconds"] = util::decimal_seconds(event.duration);
    values["nxlock_last_exit_status"] = std::to_string(event.exit_status);
    values["nxlock_last_wait_seconds"] = util::decimal_seconds(event.waited);
    values["nxlock_last_jitter_seconds"] = util::decimal_seconds(event.jitter);
  }

  const std::string label = "{key=\"" + metrics_label_value(key) + "\"} ";
  std::string text;
  for (const Metric& metric : k_metrics) {
    const auto found = values.find(std::string_view(metric.name));
    if (found == values.end()) {
      continue;  // no run yet: no last run to tell of
    }
    text += std::string("# HELP ") + metric.name + " " + metric.help + "\n";
    text += std::string("# TYPE ") + metric.name + " " + metric.type + "\n";
    text += metric.name + label + found->second + "\n";
  }
  for (const util::ProcessIdentity& run : now) {
    text += std::string(k_run_entry) + std::to_string(run.pid) + " " + std::to_string(run.start) +
            " " + run.boot + "\n";
  }
  return text;
}

void record_metrics(const std::string& dir, std::string_view key, const MetricsEvent& event) {
  util::locked_rewrite(
      dir, metrics_file_name(key), ".nxlock_metrics.lock",
      [&](const std::optional<std::string>& old) { return updated_metrics(old, key, event); });
}

}  // namespace nxlock::run
