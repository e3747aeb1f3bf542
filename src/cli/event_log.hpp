// --syslog: what lock, unlock and run-locked did, one line of key=value words
// per event in the system log (man page, run-locked's --syslog).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lock/holder.hpp"
#include "util/system_log.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

class EventLog {
 public:
  // Disabled (no --syslog): every event does nothing, and no socket is opened.
  explicit EventLog(bool enabled);

  // The lock was taken: its token (0: none to tell), the wait, and of the
  // job's command only its argv[0] (its arguments may carry secrets; `lock`: "").
  void taken(std::string_view key, int slot, std::int64_t token, util::Micros waited,
             std::string_view program);
  // Refused because the lock is held; `holder`: by whom, when one holder does.
  void busy(std::string_view key, const std::optional<lock::Holder>& holder);
  // The lock was lost while the job ran: `reason`, a verdict's token or "unknown".
  void lost(std::string_view key, std::string_view reason, std::string_view detail);
  // The job ran past --max-runtime and is being stopped.
  void stopped(std::string_view key, util::Micros max_runtime, std::string_view program);
  // A later run replaced this one (warning): for --replace, which is to come.
  void replaced(std::string_view key, std::string_view program);
  // run-locked ends: nxlock's exit status and how long the job ran.
  void ended(std::string_view key, int status, util::Micros duration, std::string_view program);
  // unlock released the lock (`forced`: --force), or could not (`reason`).
  void released(std::string_view key, bool forced);
  void not_released(std::string_view key, std::string_view reason);

 private:
  using Words = std::vector<std::pair<std::string_view, std::string>>;
  void write(util::LogLevel level, std::string_view event, std::string_view key, Words words);

  std::optional<util::SystemLog> m_log;
};

// `text` as the value of a key=value word: escaped as `list` escapes a key
// (util::escape), and in double quotes, a quote within written \x22, when it
// holds a space or a quote, or is empty; so that every word splits at spaces.
std::string log_word(std::string_view text);

}  // namespace nxlock::cli
