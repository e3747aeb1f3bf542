// What the commands' CLI11 setups share: the options of the table
// (option_table.hpp) added to an app, bound to where the runner reads them.
// Includes CLI11: only the files that build the app include this.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
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

// While one lives, add_table_option() sets up only the options that the words
// of the command line name (`--wait` of `--wait=5`, each letter of `-nq`) or
// whose environment variable is set; for any other it returns an option of no
// app, which nothing can give. CLI11 spends most of a start building options
// (BENCHMARKS.md, "The guard against its floor"): a parse that succeeds so
// means what it would with every option, as the others could have changed
// nothing; one that fails is done again with all of them, for its message.
// Not for help (asks_for_help()): it lists every option.
class OnlyNamedOptions {
 public:
  OnlyNamedOptions(int argc, char** argv);
  ~OnlyNamedOptions();
  OnlyNamedOptions(const OnlyNamedOptions&) = delete;
  OnlyNamedOptions& operator=(const OnlyNamedOptions&) = delete;

  // Whether the words ask for help, --version or --dump-options (`-h` in a
  // cluster too), which print what every option would.
  bool asks_for_help() const;
  // Whether `spec` is named by the words, or its environment variable is set.
  bool names(const OptionSpec& spec) const;
  // An option of no app (its parent `app`, for CLI11's lookups by name).
  CLI::Option* unbound(CLI::App& app);

 private:
  std::vector<std::string_view> m_long_names;
  std::string m_short_names;
  struct UnboundOption;  // cli11_options.cpp
  struct Unbound {
    const CLI::App* app;
    std::unique_ptr<UnboundOption> option;  // CLI::Option has no virtual destructor
  };
  std::vector<Unbound> m_unbound;  // kept while the apps may point to them
  CLI::Option* m_last_unbound = nullptr;
};

// Adds the option of `command` ("" for a global one) whose long name is `name`
// to `app`, as the table declares it (names, help, type name, check,
// environment variable, default shown), bound to `target`. Returns it, for the
// relations between options (excludes, needs) that the setups state (while an
// OnlyNamedOptions lives, an option of no app if the words do not name it).
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
