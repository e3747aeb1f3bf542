// The command table: name, summary, example and setup of every subcommand.
// Help, the man page and the completions are checked against it by the tests.
// Free of CLI11: a setup is only named here (cli11_app.cpp defines them).
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
  // Adds the command's options and arguments to `sub`, bound to `parsed` for
  // the commands with a fast path; the runner reads them.
  Runner (*setup)(CLI::App& sub, ParsedArgs& parsed);
};

// Every command, in the order `nxlock --help` lists them.
std::span<const Command> command_table();

// "setnx, get, ..., run-locked": the commands, for the message about one that is not.
std::string command_names();

// One setup per command (the runners are in commands_kv.cpp, commands_lock.cpp
// and command_run.cpp).
Runner setup_setnx(CLI::App& sub, ParsedArgs& parsed);
Runner setup_get(CLI::App& sub, ParsedArgs& parsed);
Runner setup_getset(CLI::App& sub, ParsedArgs& parsed);
Runner setup_del(CLI::App& sub, ParsedArgs& parsed);
Runner setup_lock(CLI::App& sub, ParsedArgs& parsed);
Runner setup_unlock(CLI::App& sub, ParsedArgs& parsed);
Runner setup_renew(CLI::App& sub, ParsedArgs& parsed);
Runner setup_status(CLI::App& sub, ParsedArgs& parsed);
Runner setup_list(CLI::App& sub, ParsedArgs& parsed);
Runner setup_run_locked(CLI::App& sub, ParsedArgs& parsed);
// doctor has no options of its own: its setup is beside its runner (command_doctor.cpp).
Runner setup_doctor(CLI::App& sub, ParsedArgs& parsed);

}  // namespace nxlock::cli
