// The CLI11 app: the global options and the named command's (or, for help,
// every command's), built from the option and command tables, then the parse;
// first with only the options the words name, then, for help or an error, all.
#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cli/command_line.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/url_checks.hpp"
#include "store/make_store.hpp"
#include "util/escape.hpp"

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
    std::string message = "unknown option " + util::escape(name);
    std::vector<std::string> candidates;
    for (const CLI::App* owner : {&app, sub}) {
      if (owner == nullptr) {
        continue;
      }
      for (const CLI::Option* option : owner->get_options()) {
        for (const std::string& candidate : option->get_lnames()) {
          if (!option->get_group().empty()) {  // not a hidden one
            candidates.push_back("--" + candidate);
          }
        }
      }
    }
    const std::string best = nearest(name, candidates);
    return best.empty() ? message : message + " (did you mean " + best + "?)";
  }
  return {};
}

// What a command's --help says of the global options, which it does not list:
// their names, and where they are told.
std::string global_options_footer() {
  std::string text = "Global options, before or after the command ('nxlock --help' says what each does):";
  std::string line = "\n ";
  for (const OptionSpec& spec : option_table()) {
    if (!spec.commands.empty() || spec.hidden) {
      continue;
    }
    std::string item = " " + std::string(spec.names);
    if (!spec.type_name.empty()) {
      item += " " + std::string(spec.type_name);
    }
    if (line.size() + item.size() > 79) {
      text += line + ",";
      line = "\n ";
    } else if (line.size() > 3) {
      line += ",";
    }
    line += item;
  }
  return text + line;
}

bool is_command(std::string_view word) {
  const std::span<const Command> commands = command_table();
  return std::any_of(commands.begin(), commands.end(),
                     [&](const Command& c) { return word == c.name; });
}

// "'lcok' is not an nxlock command (did you mean lock? commands: ...)".
std::string not_a_command(std::string_view word) {
  std::vector<std::string> names = {"help"};
  for (const Command& command : command_table()) {
    names.emplace_back(command.name);
  }
  const std::string best = nearest(word, names);
  return "'" + util::escape(word) + "' is not an nxlock command (" +
         (best.empty() ? "" : "did you mean " + best + "? ") + "commands: " + command_names() +
         ", help; see 'nxlock --help')";
}

// `nxlock help COMMAND COMMAND...`: each one's help in turn, as `nxlock COMMAND
// --help` prints it; 64 before any if one of them is no command.
std::optional<int> several_helps(char* program, std::span<char*> topics, Context& context,
                                 Runner& runner) {
  for (char* topic : topics) {
    if (!is_command(topic)) {
      context.out.error(k_exit_usage, "usage", not_a_command(topic));
      context.out.flush(k_exit_usage);
      return k_exit_usage;
    }
  }
  static char help_flag[] = "--help";
  for (std::size_t i = 0; i < topics.size(); ++i) {
    if (i > 0) {
      std::fputs("\n", stdout);
      std::fflush(stdout);
    }
    char* one[] = {program, topics[i], help_flag};
    if (const auto status = parse_command_line(3, one, context, runner); status && *status != 0) {
      return status;
    }
  }
  return 0;
}

// Whether the option `name` of `app` was given: false if it was not set up
// (OnlyNamedOptions).
bool given(const CLI::App& app, const std::string& name) {
  const CLI::Option* option = app.get_option_no_throw(name);
  return option != nullptr && option->count() > 0;
}

// parse_command_line(), with every option set up, or (`only_named`) only those
// the words name: then it prints nothing, and returns a status or throws a
// CLI::Error where the words are to be parsed again with every option.
std::optional<int> parse_words(int argc, char** argv, Context& context, Runner& runner,
                               const OnlyNamedOptions* only_named) {
  GlobalOptions& g = context.globals;
  CLI::App app{
      "nxlock: deadlock-safe locks for cron jobs and scripts, on one host or many "
      "(Redis, etcd or an embedded store)",
      "nxlock"};
  if (only_named == nullptr) {  // else none of them is named
    app.set_help_all_flag("--help-all", "Show help for every command");
    app.set_version_flag("--version", version_text(), "Print the version and built-in backends");
    add_dump_options_flag(app);
  }
  app.require_subcommand(1);
  app.get_formatter()->label("SUBCOMMAND", "COMMAND");
  app.get_formatter()->label("Subcommands", "Commands");
  add_global_options(app, g);

  // When argv names a command, only that one is set up: the others' options
  // could not be used, and help for one command lists only its own.
  const auto global_takes_value = [&](const std::string& name) { return takes_value(app, name); };
  int command_index = find_command(argc, argv, global_takes_value);
  if (only_named != nullptr &&
      (command_index >= argc || !is_command(argv[command_index]))) {
    return k_exit_usage;  // help, or a usage error: parsed again
  }
  // `nxlock help [COMMAND]`, as git's: the same as `nxlock [COMMAND] --help`.
  static char help_flag[] = "--help";
  std::vector<char*> help_argv;
  if (command_index < argc && std::string_view(argv[command_index]) == "help") {
    const std::span<char*> topics(argv + command_index + 1, argv + argc);
    if (topics.size() > 1 && std::none_of(topics.begin(), topics.end(),
                                          [](const char* t) { return t[0] == '-'; })) {
      return several_helps(argv[0], topics, context, runner);
    }
    help_argv.assign(argv, argv + argc);
    help_argv.erase(help_argv.begin() + command_index);
    help_argv.push_back(help_flag);
    argc = static_cast<int>(help_argv.size());
    argv = help_argv.data();
    command_index = find_command(argc, argv, global_takes_value);
  }
  const std::string_view named = command_index < argc ? argv[command_index] : "";
  const std::span<const Command> commands = command_table();
  const bool known = is_command(named);
  const auto global = [&](const std::string& name) {
    return app.get_option_no_throw(name) != nullptr;
  };

  if (!known && command_index < argc && !named.empty() && named[0] != '-') {
    // CLI11 would say "A subcommand is required": say which word is not one,
    // or what the words before it meant. `--urll URL status`: the option, not
    // the URL; `nxlock 9`, `nxlock -n 9`: flock's forms; `-w 5 lock`: -w's place.
    const std::string_view next = command_index + 1 < argc ? argv[command_index + 1] : "";
    std::string message;
    for (int i = 1; i + 1 < command_index && message.empty(); ++i) {
      // `nxlock -u lock k`: -u took the command's name as its value.
      const std::string option = argv[i];
      if (option.starts_with("-") && option.find('=') == std::string::npos &&
          global_takes_value(option) && is_command(argv[i + 1])) {
        message = option + " took '" + argv[i + 1] + "' as its value: give " + option +
                  " its value before the command";
      }
    }
    if (message.empty()) {
      message = misplaced_option(argc, argv, command_index, "", global, global_takes_value, true);
    }
    if (message.empty() && !is_command(next)) {
      message = flock_form_advice(named);
    }
    if (message.empty()) {
      message = misplaced_option(argc, argv, command_index, is_command(next) ? next : "", global,
                                 global_takes_value);
    }
    message = message.empty() ? not_a_command(named) : message + " (see 'nxlock --help')";
    context.out.json = names_json(argc, argv);
    context.out.error(k_exit_usage, "usage", message);
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
    if (only_named == nullptr) {  // for --help only
      sub->footer(global_options_footer() + "\n\nExample:\n  " + command.example);
    }
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
    if (only_named != nullptr) {
      throw;
    }
    return app.exit(e);  // --help, --version: printed, exit 0
  } catch (const CLI::ParseError& e) {
    if (only_named != nullptr) {
      throw;
    }
    // CLI11 may fail on an option before it has stored --json's flag.
    context.out.json = g.json || g.json_fd >= 0 || names_json(argc, argv);
    if (g.json_fd >= 0 && fcntl(g.json_fd, F_GETFD) >= 0) {
      context.out.json_fd = g.json_fd;  // --json-fd was read before the error
    }
    // The first cause on the line: a -u that took the KEY (`lock -u k`: "KEY is
    // required"), flock's options that cannot map, an option before the command
    // that belongs after it (`nxlock -n run-locked`), a misspelt one.
    const auto any_takes_value = [&](const std::string& name) {
      return takes_value(app, name) || (named_sub != nullptr && takes_value(*named_sub, name));
    };
    std::string message;
    if (const auto refused = refuse_urls(g.urls, std::getenv("NXLOCK_URL"))) {
      message = refused->subject() + ": " + refused->reason();
    }
    if (message.empty()) {
      message = flock_option_advice(argc, argv, any_takes_value);
    }
    if (message.empty()) {
      message = misplaced_option(argc, argv, command_index, named, global, global_takes_value);
    }
    if (message.empty()) {
      message = unknown_option(argc, argv, app, named_sub);
    }
    if (message.empty()) {
      message = one_line(e.what()) +
                dash_advice(named, argc, argv, is_option(app, named), any_takes_value);
    }
    context.out.error(k_exit_usage, "usage",
                      message + " (see 'nxlock " + (known ? std::string(named) + " " : "") +
                          "--help')");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }
  if (given(app, "--timeout")) {
    // Its old name, before the command (man page, GLOBAL OPTIONS): -q does not
    // silence this, so that a cron job's owner hears of it before it goes.
    context.out.warn(
        "warning: --timeout is deprecated and goes in the next release: it is the backend's "
        "I/O timeout, now --io-timeout (the wait for a lock is -w)");
    if (!given(app, "--io-timeout")) {
      g.io_timeout = g.deprecated_timeout;  // the new name wins
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, Context& context, Runner& runner) {
  // Most command lines name few options: only those are set up, unless the
  // parse fails (BENCHMARKS.md, "The guard against its floor").
  {
    OnlyNamedOptions only_named(argc, argv);
    if (!only_named.asks_for_help()) {
      try {
        if (!parse_words(argc, argv, context, runner, &only_named)) {
          return std::nullopt;
        }
      } catch (const CLI::Error&) {
      }
      context.globals = GlobalOptions{};
      context.child_command.clear();
      runner = nullptr;
    }
  }
  return parse_words(argc, argv, context, runner, nullptr);
}

}  // namespace nxlock::cli
