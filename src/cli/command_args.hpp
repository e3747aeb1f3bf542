// What the commands are given, apart from CLI11: their arguments, as parsed,
// and their runners. Free of CLI11, so that the runners need none of it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/context.hpp"

namespace nxlock::cli {

// Runs a parsed command and returns its exit status; throws util::Error.
using Runner = std::function<int(Context&)>;

// Options shared by lock and run-locked.
struct LockArgs {
  std::int64_t ttl = 60;
  bool nonblock = false;
  double wait = -1;  // seconds; negative: wait forever
  int conflict_exit = 75;
  std::string clock = "server";
  bool shared = false;     // -s, --shared: a shared holder (lock/lease_lock.hpp)
  bool exclusive = false;  // -x, --exclusive: the default, accepted as flock's
  int slots = 0;        // --slots N: a counting semaphore of N slots; zero: a plain lock
  bool syslog = false;  // --syslog (NXLOCK_SYSLOG): events to the system log (cli/event_log.hpp)
  double jitter = 0;    // --jitter SECONDS: a random 0..SECONDS before the first try
  int max_waiters = 0;  // --max-waiters N: do not wait behind N live waiters; zero: no bound
};

// setnx, get, getset: KEY and (setnx, getset) VALUE.
struct KeyValueArgs {
  std::string key;
  std::string value;
};

// run-locked's options and KEY (its COMMAND is Context::child_command).
struct RunLockedArgs {
  std::string key;
  LockArgs lock;
  bool no_renew = false;
  bool inherit_credentials = false;
  std::string on_lost = "term";
  double kill_after = 10;
  double hold = 0;
  double max_runtime = 0;                      // seconds; zero: no limit, as with timeout(1)
  std::string shell_command;                   // -c STRING before KEY: run /bin/sh -c STRING
  std::string metrics_dir;                     // --metrics-dir (NXLOCK_METRICS_DIR); empty: none
  std::vector<std::string> help_only_command;  // bound for --help only
  // --ping URL (NXLOCK_PING_URL), or --ping-file's; empty: no pings (ping_options.cpp).
  std::string ping;
  std::string ping_file;
  std::string ping_cacert;
  double ping_timeout = 2;
  bool ping_on_busy = false;
  bool replace = false;  // --replace: ask the holder to stop, then take the lock
};

// lock: KEY and the options shared with run-locked.
struct LockCommandArgs {
  std::string key;
  LockArgs lock;
};

// unlock: KEY, VALUE, --force, --clock, --slots.
struct UnlockArgs {
  std::string key;
  std::string value;
  bool force = false;
  std::string clock = "server";
  int slots = 0;
  bool syslog = false;  // --syslog (NXLOCK_SYSLOG)
};

// renew: KEY, VALUE, --ttl, --clock, --slots.
struct RenewArgs {
  std::string key;
  std::string value;
  std::int64_t ttl = 60;
  std::string clock = "server";
  int slots = 0;
};

// status: KEY, --clock, --slots.
struct StatusArgs {
  std::string key;
  std::string clock = "server";
  int slots = 0;
};

// list: PATTERN (a glob; "*": every lock), --expired and --waiters.
struct ListArgs {
  std::string pattern = "*";
  bool expired = false;
  bool waiters = false;  // --waiters: also show each waiter (pid, host, since, kind)
};

// The runners of setnx, get, getset, del and run-locked, given their arguments.
Runner setnx_runner(std::shared_ptr<KeyValueArgs> args);
Runner get_runner(std::shared_ptr<KeyValueArgs> args);
Runner getset_runner(std::shared_ptr<KeyValueArgs> args);
Runner del_runner(std::shared_ptr<std::vector<std::string>> keys);
Runner run_locked_runner(std::shared_ptr<RunLockedArgs> args);

// The runners of the other commands (commands_lock.cpp).
Runner lock_runner(std::shared_ptr<LockCommandArgs> args);
Runner unlock_runner(std::shared_ptr<UnlockArgs> args);
Runner renew_runner(std::shared_ptr<RenewArgs> args);
Runner status_runner(std::shared_ptr<StatusArgs> args);
Runner list_runner(std::shared_ptr<ListArgs> args);  // command_list.cpp

}  // namespace nxlock::cli
