// The command table: name, summary, example and setup of every subcommand.
// Help, the man page and the completions are checked against it by the tests.
#pragma once

#include "cli/cli11.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command_args.hpp"
#include "cli/context.hpp"

namespace nxlock::cli {

struct Command {
  const char* name;
  const char* summary;
  const char* example;
  // Adds the command's options and arguments to `sub`, bound to `parsed` for
  // the commands with a fast path; the runner reads them.
  Runner (*setup)(CLI::App& sub, ParsedArgs& parsed);
};

// Parses argv with CLI11 into `context` (its globals and child_command),
// `parsed` and `runner`. Returns the exit status if the invocation ends here:
// help or --version printed (0), a usage error reported (64).
std::optional<int> parse_with_cli11(int argc, char** argv, Context& context, ParsedArgs& parsed,
                                    Runner& runner);

// Every command, in the order `nxlock --help` lists them.
std::span<const Command> command_table();

// One setup per command, all in app.cpp (the runners are in commands_kv.cpp,
// commands_lock.cpp and command_run.cpp).
Runner setup_setnx(CLI::App& sub, ParsedArgs& parsed);
Runner setup_get(CLI::App& sub, ParsedArgs& parsed);
Runner setup_getset(CLI::App& sub, ParsedArgs& parsed);
Runner setup_del(CLI::App& sub, ParsedArgs& parsed);
Runner setup_lock(CLI::App& sub, ParsedArgs& parsed);
Runner setup_unlock(CLI::App& sub, ParsedArgs& parsed);
Runner setup_renew(CLI::App& sub, ParsedArgs& parsed);
Runner setup_status(CLI::App& sub, ParsedArgs& parsed);
Runner setup_run_locked(CLI::App& sub, ParsedArgs& parsed);
// doctor has no options of its own: its setup is beside its runner (command_doctor.cpp).
Runner setup_doctor(CLI::App& sub, ParsedArgs& parsed);

// Adds the options shared by lock and run-locked (LockArgs).
void add_lock_options(CLI::App& sub, LockArgs& args);

// Durations (--wait, --timeout, --kill-after) are at most this many seconds
// (about 11 days): every deadline and poll timeout then fits its type.
inline constexpr double k_max_duration_seconds = 1e6;
// A ttl (whole seconds) has the same bound, so every lock a user can ask for
// fits the durations the lock and the watchdog compute from it.
inline constexpr std::int64_t k_max_ttl = 1'000'000;
// --replicas: far more than any deployment has, small enough to say in a message.
inline constexpr int k_max_replicas = 1000;
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
