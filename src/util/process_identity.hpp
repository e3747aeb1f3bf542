// A process as /proc names it across pid reuse: its pid, its start time and the
// boot it runs in. Used to tell a lock's owner that still runs from one that is
// gone, whose pid may since have been given to another process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace nxlock::util {

struct ProcessIdentity {
  std::int64_t pid = 0;
  std::uint64_t start = 0;  // /proc/PID/stat field 22: clock ticks after boot
  std::string boot;         // /proc/sys/kernel/random/boot_id

  bool operator==(const ProcessIdentity&) const = default;
};

// Process `pid` now; nullopt where /proc does not say (no such process, no /proc).
std::optional<ProcessIdentity> identify_process(std::int64_t pid);

// This boot's id, read once; empty where /proc does not say.
const std::string& this_boot();

// True if `process` is running now on this boot: the same pid, started at the
// same tick, and not stopped, traced or a zombie (such a process renews
// nothing). Anything /proc does not confirm is not running.
bool still_running(const ProcessIdentity& process);

}  // namespace nxlock::util
