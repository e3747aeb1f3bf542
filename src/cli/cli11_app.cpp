// The CLI11 app: the global options and the named command's (or, for help,
// every command's), built from the option and command tables, then the parse.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string_view>

#include "cli/command_line.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "store/make_store.hpp"

namespace nxlock::cli {

namespace {

std::string version_text() {
  return std::string("nxlock ") + NXLOCK_VERSION + "\nbackends: " + store::builtin_backends();
}

// CLI11's messages are multi-line at times; an error is one line (man page, EXIT STATUS).
std::string one_line(std::string text) {
  for (auto& c : text) {
    if (c == '\n') {
      c = ' ';
    }
  }
  while (!text.empty() && text.back() == ' ') {
    text.pop_back();
  }
  return text;
}

// Whether `app` has an option `name` ("-w", "--wait") that takes a value.
bool takes_value(const CLI::App& app, const std::string& name) {
  const auto* option = app.get_option_no_throw(name);
  return option != nullptr && option->get_items_expected_min() > 0;
}

// Whether `name` is an option of `app` or of its command `command`.
OptionQuery is_option(const CLI::App& app, std::string_view command) {
  const CLI::App* sub = nullptr;
  try {
    sub = command.empty() ? nullptr : app.get_subcommand(std::string(command));
  } catch (const CLI::OptionNotFound&) {
  }
  return [&app, sub](const std::string& name) {
    return app.get_option_no_throw(name) != nullptr ||
           (sub != nullptr && sub->get_option_no_throw(name) != nullptr);
  };
}

// `nxlock --dump-options`, hidden: the option table, for tests/ops.
void add_dump_options_flag(CLI::App& app) {
  app.add_flag_callback(
         "--dump-options",
         [] {
           const std::string text = dump_options();
           std::fwrite(text.data(), 1, text.size(), stdout);
           throw CLI::Success();
         },
         "Print the option table")
      ->group("");  // hidden from --help
}

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, Context& context, Runner& runner) {
  GlobalOptions& g = context.globals;
  CLI::App app{
      "nxlock: deadlock-safe locks for cron jobs and scripts, on one host or many "
      "(Redis or an embedded store)",
      "nxlock"};
  app.set_help_all_flag("--help-all", "Show help for every command");
  app.set_version_flag("--version", version_text(), "Print the version and built-in backends");
  add_dump_options_flag(app);
  app.require_subcommand(1);
  app.get_formatter()->label("SUBCOMMAND", "COMMAND");
  app.get_formatter()->label("Subcommands", "Commands");
  add_global_options(app, g);

  // When argv names a command, only that one is set up: the others' options
  // could not be used, and help for one command lists only its own.
  const int command_index =
      find_command(argc, argv, [&](const std::string& name) { return takes_value(app, name); });
  const std::string_view named = command_index < argc ? argv[command_index] : "";
  const std::span<const Command> commands = command_table();
  const bool known = std::any_of(commands.begin(), commands.end(),
                                 [&](const Command& c) { return named == c.name; });

  if (!known && command_index < argc && !named.empty() && named[0] != '-') {
    // CLI11 would say "A subcommand is required": say which word is not one.
    context.out.json = names_json(argc, argv);
    context.out.error(k_exit_usage, "usage",
                      "'" + std::string(named) + "' is not an nxlock command (commands: " +
                          command_names() + "; see 'nxlock --help')");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }

  CLI::App* run_locked = nullptr;
  for (const Command& command : commands) {
    if (known && named != command.name) {
      continue;
    }
    CLI::App* sub = app.add_subcommand(command.name, command.summary);
    // Global options may also follow the command name. (run-locked's child
    // command line is split off argv before parsing, so none of it falls through.)
    sub->fallthrough();
    if (std::string_view(command.name) == "run-locked") {
      run_locked = sub;
    }
    sub->footer(std::string("Example:\n  ") + command.example);
    // The callback runs for the command parsed only (with no command named,
    // every one is set up, for --help).
    sub->callback([&runner, setup_runner = command.setup(*sub)] { runner = setup_runner; });
  }

  try {
    if (named == "run-locked") {
      // Its own options and the global ones that fall through to the app.
      context.child_command =
          split_child_command(command_index, argc, argv, [&](const std::string& name) {
            return takes_value(*run_locked, name) || takes_value(app, name);
          });
    }
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: printed, exit 0
  } catch (const CLI::ParseError& e) {
    // CLI11 may fail on an option before it has stored --json's flag.
    context.out.json = g.json || names_json(argc, argv);
    context.out.error(k_exit_usage, "usage",
                      one_line(e.what()) + dash_advice(named, argc, argv, is_option(app, named)) +
                          " (see 'nxlock --help')");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }
  return std::nullopt;
}

}  // namespace nxlock::cli
