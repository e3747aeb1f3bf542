// The command table: name, summary, example and setup of every subcommand.
// Help, the man page and the completions are checked against it by the tests.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <span>
#include <string_view>

#include "cli/context.hpp"

namespace nxlock::cli {

// Runs a parsed command and returns its exit status; throws util::Error.
using Runner = std::function<int(Context&)>;

struct Command {
  const char* name;
  const char* summary;
  const char* example;
  // Adds the command's options and arguments to `sub`; the runner reads them.
  Runner (*setup)(CLI::App& sub);
};

// Every command, in the order `nxlock --help` lists them.
std::span<const Command> command_table();

// One setup per command (commands_kv.cpp, commands_lock.cpp, command_run.cpp).
Runner setup_setnx(CLI::App& sub);
Runner setup_get(CLI::App& sub);
Runner setup_getset(CLI::App& sub);
Runner setup_del(CLI::App& sub);
Runner setup_lock(CLI::App& sub);
Runner setup_unlock(CLI::App& sub);
Runner setup_renew(CLI::App& sub);
Runner setup_status(CLI::App& sub);
Runner setup_run_locked(CLI::App& sub);

// Options shared by lock and run-locked.
struct LockArgs {
  std::int64_t ttl = 60;
  bool nonblock = false;
  double wait = -1;  // seconds; negative: wait forever
  int conflict_exit = 75;
  std::string clock = "server";
};
void add_lock_options(CLI::App& sub, LockArgs& args);

// Durations (--wait, --timeout, --kill-after) are at most this many seconds
// (about 11 days): every deadline and poll timeout then fits its type.
inline constexpr double k_max_duration_seconds = 1e6;
// Below a millisecond a socket timeout rounds to zero, which means "none".
inline constexpr double k_min_timeout_seconds = 0.001;

// Checks a duration option: a finite number of seconds in [min, max]; the
// message names the bounds (a usage error, exit 64).
CLI::Validator duration_check(double min_seconds, double max_seconds);
void add_clock_option(CLI::App& sub, std::string& clock);

// Whether the command line being parsed may name an option whose long name
// contains `word` (or short name is `letter`), or asks for help: a seldom-used
// option need not be built otherwise, which saves most of start-up (app.cpp).
bool may_name(std::string_view word, char letter = 0);

}  // namespace nxlock::cli
