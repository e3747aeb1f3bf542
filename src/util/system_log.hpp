// SystemLog: lines to the system log (/dev/log) as syslog(3) writes them, but
// never blocking: a log that is absent, stuck or full costs the line.
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <utility>

#include "util/fd.hpp"

namespace nxlock::util {

// The severities nxlock logs at (syslog(3)'s LOG_WARNING, LOG_NOTICE, LOG_INFO).
enum class LogLevel { warning = 4, notice = 5, info = 6 };

// The datagram glibc's syslog(3) sends for `message` with openlog(ident,
// LOG_PID, LOG_USER), RFC 3164's form: "<PRI>Mmm dd hh:mm:ss IDENT[PID]: MESSAGE",
// PRI the facility user (8) plus `level`, the time `when` in local time.
std::string syslog_datagram(LogLevel level, std::string_view ident, long pid, std::time_t when,
                            std::string_view message);

class SystemLog {
 public:
  // Nothing is opened until the first line.
  explicit SystemLog(std::string ident, std::string path = "/dev/log")
      : m_ident(std::move(ident)), m_path(std::move(path)) {}

  // Sends `message` as one datagram, never waiting: glibc's syslog() blocks
  // while the log's socket buffer is full, and a stuck journald must not
  // delay a lock's release. False: the line was dropped (no socket at
  // `path`, not a datagram socket, or its buffer full).
  bool send(LogLevel level, std::string_view message);

 private:
  bool connect();

  std::string m_ident;
  std::string m_path;
  UniqueFd m_fd;
};

}  // namespace nxlock::util
