// The exit statuses of the man page's EXIT STATUS, in one place.
#pragma once

#include "util/error.hpp"

namespace nxlock::cli {

inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_no = 1;            // the condition was not met
inline constexpr int k_exit_usage = 64;        // EX_USAGE
inline constexpr int k_exit_data = 65;         // EX_DATAERR
inline constexpr int k_exit_unavailable = 69;  // EX_UNAVAILABLE
inline constexpr int k_exit_internal = 70;     // EX_SOFTWARE
inline constexpr int k_exit_busy = 75;         // EX_TEMPFAIL: lock busy or wait timed out
inline constexpr int k_exit_permission = 77;   // EX_NOPERM
inline constexpr int k_exit_config = 78;       // EX_CONFIG: a Redis that may evict locks
// run-locked stopped its child because the lock was lost. Outside sysexits(3)
// and the shell's 126-165, so it is never confused with busy (75) or a signal.
inline constexpr int k_exit_lock_lost = 79;
// run-locked stopped its child at --max-runtime, as timeout(1) exits.
inline constexpr int k_exit_timed_out = 124;

inline int exit_status_for(util::ErrorKind kind) {
  switch (kind) {
    case util::ErrorKind::usage:
      return k_exit_usage;
    case util::ErrorKind::data:
      return k_exit_data;
    case util::ErrorKind::unavailable:
      return k_exit_unavailable;
    case util::ErrorKind::permission:
      return k_exit_permission;
    case util::ErrorKind::config:
      return k_exit_config;
    case util::ErrorKind::internal:
      break;
  }
  return k_exit_internal;
}

}  // namespace nxlock::cli
