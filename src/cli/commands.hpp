// What the commands' CLI11 setups share: the options of the table
// (option_table.hpp) added to an app, bound to where the runner reads them.
// Includes CLI11: only the files that build the app include this.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/app.hpp"
#include "cli/command_args.hpp"
#include "cli/command_table.hpp"
#include "cli/context.hpp"
#include "cli/option_bounds.hpp"
#include "cli/option_table.hpp"

namespace nxlock::cli {

// Adds the option of `command` ("" for a global one) whose long name is `name`
// to `app`, as the table declares it (names, help, type name, check,
// environment variable, default shown), bound to `target`. Returns it, for the
// relations between options (excludes, needs) that the setups state.
CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              bool& target);
CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              std::string& target);
CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              double& target);
CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              std::int64_t& target);
CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              int& target);
CLI::Option* add_table_option(CLI::App& app, std::string_view command, std::string_view name,
                              std::vector<std::string>& target);

// Applies the environment variables of the table's checked options of
// `command` ("" for the global ones) on `app`, after the parse: those the
// command line did not give (nor an option that excludes them). Throws
// CLI::ValidationError naming the variable for a bad value.
void apply_environment(CLI::App& app, std::string_view command);

// Adds the options of lock and run-locked (LockArgs) to `sub`, a `command`.
void add_lock_options(CLI::App& sub, std::string_view command, LockArgs& args);

// The global options, on the app: each command falls through to them.
void add_global_options(CLI::App& app, GlobalOptions& globals);

}  // namespace nxlock::cli
