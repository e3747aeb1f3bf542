// --syslog's events as lines of key=value words (event_log.hpp).
#include "cli/event_log.hpp"

#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::cli {

std::string log_word(std::string_view text) {
  const std::string escaped = util::escape(text);
  if (!escaped.empty() && escaped.find_first_of(" \"") == std::string::npos) {
    return escaped;
  }
  std::string quoted = "\"";
  for (const char c : escaped) {
    quoted += c == '"' ? std::string("\\x22") : std::string(1, c);
  }
  return quoted + "\"";
}

EventLog::EventLog(bool enabled) {
  if (enabled) {
    m_log.emplace("nxlock");
  }
}

void EventLog::write(util::LogLevel level, std::string_view event, std::string_view key,
                     Words words) {
  if (!m_log) {
    return;
  }
  std::string line = "event=" + std::string(event) + " key=" + log_word(key);
  for (const auto& [name, value] : words) {
    if (!value.empty()) {
      line += " " + std::string(name) + "=" + value;
    }
  }
  // A dropped line costs nothing else (system_log.hpp); -v says so, for
  // whoever wonders where the events went.
  if (!m_log->send(level, line)) {
    util::trace("--syslog: event " + std::string(event) +
                " not logged: /dev/log is missing, not a datagram socket, or full");
  }
}

void EventLog::taken(std::string_view key, int slot, std::int64_t token, util::Micros waited,
                     std::string_view program) {
  write(util::LogLevel::info, "taken", key,
        {{"slot", slot > 0 ? std::to_string(slot) : ""},
         {"token", token > 0 ? std::to_string(token) : ""},
         {"waited", util::decimal_seconds(waited)},
         {"command", program.empty() ? "" : log_word(program)}});
}

void EventLog::busy(std::string_view key, const std::optional<lock::Holder>& holder) {
  write(util::LogLevel::notice, "busy", key,
        {{"holder_pid", holder ? std::to_string(holder->pid) : ""},
         {"holder_host", holder ? log_word(holder->host) : ""}});
}

void EventLog::lost(std::string_view key, std::string_view reason, std::string_view detail) {
  write(util::LogLevel::warning, "lost", key,
        {{"reason", log_word(reason)}, {"detail", detail.empty() ? "" : log_word(detail)}});
}

void EventLog::stopped(std::string_view key, util::Micros max_runtime, std::string_view program) {
  write(util::LogLevel::warning, "stopped", key,
        {{"max_runtime", util::decimal_seconds(max_runtime)}, {"command", log_word(program)}});
}

void EventLog::replaced(std::string_view key, std::string_view program) {
  write(util::LogLevel::warning, "replaced", key, {{"command", log_word(program)}});
}

void EventLog::ended(std::string_view key, int status, util::Micros duration,
                     std::string_view program) {
  write(status == 0 ? util::LogLevel::info : util::LogLevel::warning, "ended", key,
        {{"status", std::to_string(status)},
         {"duration", util::decimal_seconds(duration)},
         {"command", log_word(program)}});
}

void EventLog::released(std::string_view key, bool forced) {
  write(util::LogLevel::info, "released", key, {{"forced", forced ? "yes" : ""}});
}

void EventLog::not_released(std::string_view key, std::string_view reason) {
  write(util::LogLevel::warning, "not_released", key, {{"reason", log_word(reason)}});
}

}  // namespace nxlock::cli
