// The CLI11 app: the global options and the named command's (or, for help,
// every command's), built from the option and command tables, then the parse.
#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

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
  // A hidden option's error: CLI11 leaves its name out (named() puts it in).
  if (text.starts_with(": ")) {
    text.erase(0, 2);
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

// The edit distance of `a` and `b`, a transposition counting as one edit
// ("wiat" is one from "wait").
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) {
    for (std::size_t j = 0; j <= b.size(); ++j) {
      if (i == 0 || j == 0) {
        d[i][j] = i + j;
        continue;
      }
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// "unknown option --wiat (did you mean --wait?)" for the first word before
// `--` that looks like a long option and is none of `app`'s or of its command
// `sub`'s; "" when every such word is one. CLI11 would say "The following
// arguments were not expected", naming the key too.
std::string unknown_option(int argc, char** argv, const CLI::App& app, const CLI::App* sub) {
  const auto known = [&](const std::string& name) {
    return app.get_option_no_throw(name) != nullptr ||
           (sub != nullptr && sub->get_option_no_throw(name) != nullptr);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") {
      break;
    }
    if (word.size() < 3 || !word.starts_with("--")) {
      continue;
    }
    const std::string name(word.substr(0, word.find('=')));
    if (known(name)) {
      continue;
    }
    std::string message = "unknown option " + name;
    std::string best;
    std::size_t best_distance = name.size() < 7 ? 2 : 3;  // "--wiat": 1 from "--wait"
    for (const CLI::App* owner : {&app, sub}) {
      if (owner == nullptr) {
        continue;
      }
      for (const CLI::Option* option : owner->get_options()) {
        for (const std::string& candidate : option->get_lnames()) {
          const std::size_t d = distance(name.substr(2), candidate);
          if (!option->get_group().empty() && d < best_distance) {
            best = "--" + candidate;
            best_distance = d;
          }
        }
      }
    }
    return best.empty() ? message : message + " (did you mean " + best + "?)";
  }
  return {};
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
  const auto global_takes_value = [&](const std::string& name) { return takes_value(app, name); };
  int command_index = find_command(argc, argv, global_takes_value);
  // `nxlock help [COMMAND]`, as git's: the same as `nxlock [COMMAND] --help`.
  static char help_flag[] = "--help";
  std::vector<char*> help_argv;
  if (command_index < argc && std::string_view(argv[command_index]) == "help") {
    help_argv.assign(argv, argv + argc);
    help_argv.erase(help_argv.begin() + command_index);
    help_argv.push_back(help_flag);
    argc = static_cast<int>(help_argv.size());
    argv = help_argv.data();
    command_index = find_command(argc, argv, global_takes_value);
  }
  const std::string_view named = command_index < argc ? argv[command_index] : "";
  const std::span<const Command> commands = command_table();
  const bool known = std::any_of(commands.begin(), commands.end(),
                                 [&](const Command& c) { return named == c.name; });

  if (!known && command_index < argc && !named.empty() && named[0] != '-') {
    // CLI11 would say "A subcommand is required": say which word is not one.
    context.out.json = names_json(argc, argv);
    context.out.error(k_exit_usage, "usage",
                      "'" + std::string(named) + "' is not an nxlock command (commands: " +
                          command_names() + ", help; see 'nxlock --help')");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }

  CLI::App* named_sub = nullptr;
  for (const Command& command : commands) {
    if (known && named != command.name) {
      continue;
    }
    CLI::App* sub = app.add_subcommand(command.name, command.summary);
    // Global options may also follow the command name. (run-locked's child
    // command line is split off argv before parsing, so none of it falls through.)
    sub->fallthrough();
    if (known) {
      named_sub = sub;
    }
    sub->footer(std::string("Example:\n  ") + command.example);
    // The callback runs for the command parsed only (with no command named,
    // every one is set up, for --help).
    sub->callback([&runner, setup_runner = command.setup(*sub)] { runner = setup_runner; });
  }

  try {
    if (named == "run-locked") {
      // Its own options and the global ones that fall through to the app.
      ChildCommand child =
          split_child_command(command_index, argc, argv, [&](const std::string& name) {
            return takes_value(*named_sub, name) || takes_value(app, name);
          });
      if (!child.error.empty()) {
        throw CLI::ValidationError("run-locked", child.error);
      }
      context.child_command = std::move(child.words);
    }
    app.parse(argc, argv);
    // NXLOCK_TTL, NXLOCK_WAIT: after the command line, which wins.
    apply_environment(app, "");
    if (named_sub != nullptr) {
      apply_environment(*named_sub, named);
    }
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: printed, exit 0
  } catch (const CLI::ParseError& e) {
    // CLI11 may fail on an option before it has stored --json's flag.
    context.out.json = g.json || g.json_fd >= 0 || names_json(argc, argv);
    if (g.json_fd >= 0 && fcntl(g.json_fd, F_GETFD) >= 0) {
      context.out.json_fd = g.json_fd;  // --json-fd was read before the error
    }
    std::string message = unknown_option(argc, argv, app, named_sub);
    if (message.empty()) {
      message = one_line(e.what()) +
                dash_advice(named, argc, argv, is_option(app, named), [&](const std::string& name) {
                  return takes_value(app, name) ||
                         (named_sub != nullptr && takes_value(*named_sub, name));
                });
    }
    context.out.error(k_exit_usage, "usage",
                      message + " (see 'nxlock " + (known ? std::string(named) + " " : "") +
                          "--help')");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }
  if (app.get_option("--timeout")->count() > 0) {
    // Its old name, before the command (man page, GLOBAL OPTIONS): -q does not
    // silence this, so that a cron job's owner hears of it before it goes.
    context.out.warn(
        "warning: --timeout is deprecated and goes in the next release: it is the backend's "
        "I/O timeout, now --io-timeout (the wait for a lock is -w)");
    if (app.get_option("--io-timeout")->count() == 0) {
      g.io_timeout = g.deprecated_timeout;  // the new name wins
    }
  }
  return std::nullopt;
}

}  // namespace nxlock::cli
