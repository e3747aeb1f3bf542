// The watchdog's two pipes: what nxlock and its watchdog tell each other, and how.
// Internal to run/: watchdog.cpp writes one end, watchdog_process.cpp the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "run/job_environment.hpp"

namespace nxlock::run {

// What the watchdog tells us, one record at a time (atomic on a pipe).
struct Report {
  // stopping: the deadline came with no newer one, and it began stopping the job.
  enum Kind : int { started, exec_failed, spawn_failed, stopping, ended, all_gone };
  Kind kind;
  int value;  // started: the job's pid; *_failed: errno; ended: the job's wait status
};

// What we tell the watchdog, each word with what follows it in one write
// (atomic on a pipe: a stop of ours can never leave half a message);
// end-of-file (we died) means kill_everything, or, before the job started,
// that there is no job. Times are CLOCK_MONOTONIC microseconds, which every
// process of the boot shares; INT64_MAX is "never".
inline constexpr char k_go = 'g';  // then a GoHeader, its environment settings and values
// then an int64, a renewal's new deadline, a uint32 and that many bytes of values
inline constexpr char k_update = 'u';
inline constexpr char k_stop = 's';      // then a StopOrder: the lock is lost
inline constexpr char k_done = 'd';
inline constexpr char k_kill_all = 'k';

struct GoHeader {
  std::uint32_t take_terminal;
  std::uint32_t environment_size;  // bytes of encoded settings that follow
  std::int64_t deadline;           // the lock's, at the start
  std::int64_t grace;              // StopSchedule::grace
  std::int64_t death_grace;        // JobWatchdog::Go::death_grace
  std::int64_t fence;              // TakenHold
  std::int64_t ttl;
  std::int64_t hold_until;
  std::uint32_t values_size;       // bytes of encoded values after the settings
  std::uint32_t enforced;          // StopSchedule::enforced
};

struct StopOrder {
  std::int64_t signo;    // for the job's group now: SIGTERM, or SIGKILL for all of it
  std::int64_t kill_at;  // SIGKILL for all of it then, at the latest
};

// Environment settings on the wire: NAME \0, then '=' VALUE \0 to set it or '-' to remove it.
std::string encode_environment(const std::vector<EnvSetting>& settings);
// Applies encoded settings to our own environment (the watchdog's, which the job inherits).
void apply_environment(const std::string& bytes);

// Values on the wire: each a uint32 length, then its bytes.
std::string encode_values(const std::vector<std::string>& values);
std::vector<std::string> decode_values(const std::string& bytes);

// Reads or writes all of it, through EINTR; false on end-of-file or an error.
bool read_exactly(int fd, void* data, std::size_t size);
bool write_exactly(int fd, const std::string& bytes);

// One report, in one write (atomic on a pipe); false if it could not be sent
// or received whole.
bool send_report(int fd, Report::Kind kind, int value);
bool receive_report(int fd, Report& report);

}  // namespace nxlock::run
