// The command table: name, summary, example and setup of every subcommand.
// Help, the man page and the completions are checked against it by the tests
// (tests/ops), as they are against the option table (option_table.hpp).
// Free of CLI11: a setup is only named here (command_setups.cpp defines them).
#pragma once

#include <span>
#include <string>

#include "cli/command_args.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace nxlock::cli {

struct Command {
  const char* name;
  const char* summary;
  const char* example;
  // Adds the command's options (from the option table) and operands to `sub`,
  // bound to the arguments its runner reads; returns that runner.
  Runner (*setup)(CLI::App& sub);
};

// Every command, in the order `nxlock --help` lists them.
std::span<const Command> command_table();

// "setnx, get, ..., run-locked": the commands, for the message about one that is not.
std::string command_names();

// One setup per command (command_setups.cpp; the runners are in commands_kv.cpp,
// commands_lock.cpp and command_run.cpp).
Runner setup_setnx(CLI::App& sub);
Runner setup_get(CLI::App& sub);
Runner setup_getset(CLI::App& sub);
Runner setup_del(CLI::App& sub);
Runner setup_lock(CLI::App& sub);
Runner setup_unlock(CLI::App& sub);
Runner setup_renew(CLI::App& sub);
Runner setup_status(CLI::App& sub);
Runner setup_list(CLI::App& sub);
Runner setup_run_locked(CLI::App& sub);
// doctor has no options of its own: its setup is beside its runner (command_doctor.cpp).
Runner setup_doctor(CLI::App& sub);

}  // namespace nxlock::cli
