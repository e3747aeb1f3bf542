// The nxlock command line: the one place where errors become exit statuses.
#include "cli/app.hpp"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/fast_path.hpp"
#include "store/make_store.hpp"
#include "util/escape.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

namespace nxlock::cli {

namespace {

constexpr Command k_commands[] = {
    {"setnx", "Set KEY to VALUE if KEY does not exist (prints 1 or 0)",
     "nxlock setnx deploy-owner \"$HOSTNAME\"", setup_setnx},
    {"get", "Print the value of KEY", "nxlock get deploy-owner", setup_get},
    {"getset", "Set KEY to VALUE and print the old value", "nxlock getset counter 0", setup_getset},
    {"del", "Delete keys (prints how many were removed)", "nxlock del deploy-owner", setup_del},
    {"lock", "Take the lock KEY and print its value (pass it to unlock/renew)",
     "v=$(nxlock lock -w 30 deploy) && trap 'nxlock unlock deploy \"$v\"' EXIT", setup_lock},
    {"unlock", "Release the lock KEY if it still holds VALUE", "nxlock unlock deploy \"$v\"",
     setup_unlock},
    {"renew", "Extend the lock KEY that still holds VALUE (prints the new value)",
     "v=$(nxlock renew -t 300 deploy \"$v\")", setup_renew},
    {"status", "Show whether the lock KEY is held, until when and by whom",
     "nxlock status --json nightly-backup", setup_status},
    {"run-locked", "Run COMMAND while holding the lock KEY, then release it",
     "nxlock run-locked -n nightly-backup /usr/local/bin/backup", setup_run_locked},
    {"doctor", "Check that the backend is fit for locks, and say what to fix",
     "nxlock -u redis://db1:6379 doctor", setup_doctor},
};

std::string version_text() {
  return std::string("nxlock ") + NXLOCK_VERSION + "\nbackends: " + store::builtin_backends();
}

// CLI11's messages are multi-line at times; the contract wants one line.
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

// "setnx, get, ..., run-locked": the commands, for the message about one that is not.
std::string command_names() {
  std::string names;
  for (const Command& command : k_commands) {
    names += names.empty() ? "" : ", ";
    names += command.name;
  }
  return names;
}

}  // namespace

std::span<const Command> command_table() {
  return k_commands;
}

CLI::Validator duration_check(double min_seconds, double max_seconds) {
  // "0.001", "1000000": readable, never hundreds of digits.
  const auto bound = [](double seconds) {
    return util::decimal_seconds(util::Micros(static_cast<std::int64_t>(seconds * 1e6)));
  };
  const std::string range = "[" + bound(min_seconds) + " - " + bound(max_seconds) + "]";
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        // from_chars, not strtod: plain decimal only (no "0x10", no locale).
        double seconds = 0;
        const char* last = input.data() + input.size();
        const auto [end, ec] = std::from_chars(input.data(), last, seconds);
        // NaN compares false with everything and infinity overflows every
        // deadline: both are refused, as is anything out of range.
        if (input.empty() || ec != std::errc() || end != last || !std::isfinite(seconds) ||
            seconds < min_seconds || seconds > max_seconds) {
          return "'" + input + "' is not a number of seconds in " + range;
        }
        return {};
      },
      "NUMBER in " + range);
}

namespace {

// The command line run() is parsing. Building a CLI11 option costs a few
// thousand instructions, and CLI11 compares each new one with all before it:
// options that are seldom used are left out when this command line cannot name
// them (may_name()). Unset (no run() under way), every option is built.
struct ParsedArgv {
  int argc = 0;
  char** argv = nullptr;
};
ParsedArgv g_parsed;

}  // namespace

// False only if no word of the command line that starts with '-' contains
// `word` (the option's long name, or a distinctive part of it), no single-dash
// word (a short option or a cluster such as -nE5) contains `letter`, and none
// asks for help (--help, --help-all, or -h alone or in a cluster such as -qh:
// help lists every option). Then CLI11 parses the command line to the same
// result and the same messages without the option. Conservative: the words of
// run-locked's child command count too.
bool may_name(std::string_view word, char letter) {
  if (g_parsed.argv == nullptr) {
    return true;
  }
  for (int i = 1; i < g_parsed.argc; ++i) {
    const std::string_view token = g_parsed.argv[i];
    if (token.size() < 2 || token[0] != '-') {
      continue;
    }
    if (token.find(word) != std::string_view::npos ||
        token.find("help") != std::string_view::npos) {
      return true;
    }
    if (token[1] != '-' && (token.find('h') != std::string_view::npos ||
                            (letter != 0 && token.find(letter) != std::string_view::npos))) {
      return true;
    }
  }
  return false;
}

namespace {

// The global options that only rediss:// and redis+sentinel:// URLs or a
// replicated Redis use: the words that name them, and their environment
// variables. Together they were 131 k of the 759 k instructions of a plain
// `setnx` (BENCHMARKS.md).
constexpr std::string_view k_backend_option_words[] = {"cacert",   "cert",     "key",     "sni",
                                                       "insecure", "sentinel", "replicas"};
constexpr const char* k_backend_option_env[] = {"NXLOCK_CACERT", "NXLOCK_CACERTDIR", "NXLOCK_CERT",
                                                "NXLOCK_CERT_KEY"};
constexpr const char* k_prefix_env = "NXLOCK_PREFIX";

bool backend_option_environment_set() {
  return std::any_of(std::begin(k_backend_option_env), std::end(k_backend_option_env),
                     [](const char* name) { return std::getenv(name) != nullptr; });
}

// Whether the backend options may be in play: named on the command line (see
// may_name()) or set in the environment.
bool needs_backend_options() {
  return backend_option_environment_set() ||
         std::any_of(std::begin(k_backend_option_words), std::end(k_backend_option_words),
                     [](std::string_view word) { return may_name(word); });
}

}  // namespace

bool option_environment_set() {
  return std::getenv(k_prefix_env) != nullptr || backend_option_environment_set();
}

void add_clock_option(CLI::App& sub, std::string& clock) {
  if (!may_name("clock")) {
    return;  // the default stands, as CLI11 would leave it
  }
  sub.add_option("--clock", clock,
                 "Whose clock decides expiry: server (Redis TIME) or local (this host)")
      ->check(CLI::IsMember({"server", "local"}))
      ->capture_default_str();
}

void add_lock_options(CLI::App& sub, LockArgs& args) {
  sub.add_option("-t,--ttl", args.ttl, "Seconds the lock holds without renewal")
      ->check(CLI::Range(std::int64_t{1}, k_max_ttl))
      ->type_name("SECONDS")
      ->capture_default_str();
  auto* nonblock = sub.add_flag("-n,--nonblock", args.nonblock, "Try once; do not wait");
  sub.add_option("-w,--wait", args.wait, "Give up after SECONDS (fractions allowed)")
      ->check(duration_check(0, k_max_duration_seconds))
      ->type_name("SECONDS")
      ->excludes(nonblock);
  if (may_name("conflict", 'E')) {
    sub.add_option("-E,--conflict-exit-code", args.conflict_exit,
                   "Exit status when the lock is busy")
        ->check(CLI::Range(0, 255))
        ->type_name("N")
        ->capture_default_str();
  }
  add_clock_option(sub, args.clock);
}

// Every command's options and operands, here with the rest of CLI11's set-up:
// CLI11's headers cost each translation unit that includes them a static
// initialiser (command_args.hpp). The runners are in commands_kv.cpp,
// command_run.cpp and commands_lock.cpp.

namespace {
// Binds KEY (and VALUE) of `sub` to a new KeyValueArgs, which `parsed` keeps.
std::shared_ptr<KeyValueArgs> add_key_value(CLI::App& sub, ParsedArgs& parsed, bool with_value) {
  parsed.kv = std::make_shared<KeyValueArgs>();
  KeyValueArgs& args = *parsed.kv;
  sub.add_option("KEY", args.key, "The key (use -- before one that starts with '-')")->required();
  if (with_value) {
    sub.add_option("VALUE", args.value, "The value")->required();
  }
  return parsed.kv;
}

}  // namespace

Runner setup_setnx(CLI::App& sub, ParsedArgs& parsed) {
  return setnx_runner(add_key_value(sub, parsed, true));
}

Runner setup_get(CLI::App& sub, ParsedArgs& parsed) {
  return get_runner(add_key_value(sub, parsed, false));
}

Runner setup_getset(CLI::App& sub, ParsedArgs& parsed) {
  return getset_runner(add_key_value(sub, parsed, true));
}

Runner setup_del(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto keys = std::make_shared<std::vector<std::string>>();
  sub.add_option("KEY", *keys, "The keys to delete")->required();
  return del_runner(keys);
}

Runner setup_run_locked(CLI::App& sub, ParsedArgs& parsed) {
  parsed.run = std::make_shared<RunLockedArgs>();
  const auto& args = parsed.run;
  add_lock_options(sub, args->lock);
  // Each seldom-used option only if the command line may name it (may_name()).
  if (may_name("renew")) {
    sub.add_flag("--no-renew", args->no_renew, "Do not renew the lock while COMMAND runs");
  }
  if (may_name("inherit")) {
    sub.add_flag("--inherit-credentials", args->inherit_credentials,
                 "Leave NXLOCK_PASSWORD, REDISCLI_AUTH and a password in NXLOCK_URL in "
                 "COMMAND's environment (removed by default)");
  }
  if (may_name("on-lost")) {
    sub.add_option("--on-lost", args->on_lost,
                   "If the lock is lost: term (SIGTERM, then SIGKILL), kill, or ignore (warn)")
        ->check(CLI::IsMember({"term", "kill", "ignore"}))
        ->capture_default_str();
  }
  if (may_name("kill-after")) {
    sub.add_option("--kill-after", args->kill_after,
                   "Seconds between SIGTERM and SIGKILL when the lock is lost")
        ->check(duration_check(0, k_max_duration_seconds))
        ->type_name("SECONDS")
        ->capture_default_str();
  }
  if (may_name("hold")) {
    sub.add_option("--hold", args->hold,
                   "Keep the lock until SECONDS after it was taken, even if COMMAND ends sooner: "
                   "the same crontab line on many hosts then runs once per tick (a bit longer "
                   "than clock skew + cron's start jitter, shorter than the period)")
        ->check(duration_check(0, k_max_duration_seconds))
        ->type_name("SECONDS")
        ->capture_default_str();
  }
  sub.add_option("KEY", args->key, "The lock's key; options end here")->required();
  // Only for --help: the command line is split off before CLI11 sees it.
  if (may_name("help")) {
    sub.add_option("COMMAND", args->help_only_command,
                   "The command to run (no shell) and its arguments, passed untouched");
  }
  // COMMAND [ARGS...] is split off argv before CLI11 parses (app.cpp), so that
  // nothing after KEY is ever taken for an option of ours.
  return run_locked_runner(args);
}

Runner setup_lock(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto args = std::make_shared<LockCommandArgs>();
  add_lock_options(sub, args->lock);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  return lock_runner(args);
}

Runner setup_unlock(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto args = std::make_shared<UnlockArgs>();
  auto* force = sub.add_flag("-f,--force", args->force, "Delete whatever the key holds");
  add_clock_option(sub, args->clock);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  sub.add_option("VALUE", args->value, "The value `lock` printed")->excludes(force);
  return unlock_runner(args);
}

Runner setup_renew(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto args = std::make_shared<RenewArgs>();
  sub.add_option("-t,--ttl", args->ttl, "Seconds from now the lock holds")
      ->check(CLI::Range(std::int64_t{1}, k_max_ttl))
      ->type_name("SECONDS")
      ->capture_default_str();
  add_clock_option(sub, args->clock);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  sub.add_option("VALUE", args->value, "The value `lock` (or the last renew) printed")->required();
  return renew_runner(args);
}

Runner setup_status(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto args = std::make_shared<StatusArgs>();
  add_clock_option(sub, args->clock);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  return status_runner(args);
}

// The global options, on the app: each command falls through to them. -u
// always; those of k_backend_option_words only if `backend_options` (see
// needs_backend_options()).
void add_global_options(CLI::App& app, GlobalOptions& g, bool backend_options) {
  auto* url =
      app.add_option("-u,--url", g.urls,
                     "Backend: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS), "
                     "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,…]/MASTER[/DB], "
                     "unix:///PATH[?db=N] or file:///PATH (default: the embedded "
                     "store); repeated (or several in NXLOCK_URL), independent servers "
                     "that lock by majority")
          ->type_name("URL")
          ->allow_extra_args(false)  // one URL per -u: `-u URL KEY` must leave KEY alone
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  url->envname("NXLOCK_URL");
  // The others only if the command line may name them (may_name()), or, for
  // --prefix, NXLOCK_PREFIX may set it.
  if (may_name("password")) {
    app.add_option("--password-file", g.password_file,
                   "Read the Redis password from FILE (or set NXLOCK_PASSWORD / REDISCLI_AUTH)")
        ->type_name("FILE");
  }
  if (may_name("timeout")) {
    app.add_option("--timeout", g.timeout, "Redis connect and per-command timeout, seconds")
        ->check(duration_check(k_min_timeout_seconds, k_max_duration_seconds))
        ->type_name("SECONDS")
        ->capture_default_str();
  }
  if (may_name("prefix") || std::getenv(k_prefix_env) != nullptr) {
    app.add_option("--prefix", g.prefix, "Prepended to every key")
        ->type_name("STRING")
        ->envname(k_prefix_env);
  }
  if (may_name("json")) {
    app.add_flag("--json", g.json, "Print one JSON object on stdout");
  }
  CLI::Option* quiet = nullptr;
  if (may_name("quiet", 'q')) {
    quiet = app.add_flag("-q,--quiet", g.quiet, "Say less on stderr");
  }
  if (may_name("verbose", 'v')) {
    auto* verbose = app.add_flag("-v,--verbose", g.verbose, "Trace each backend step on stderr");
    if (quiet != nullptr) {
      verbose->excludes(quiet);
    }
  }
  if (!backend_options) {
    return;
  }
  app.add_option("--cacert", g.cacert, "rediss://: verify the server with the CAs in FILE")
      ->type_name("FILE")
      ->envname("NXLOCK_CACERT");
  app.add_option("--cacertdir", g.cacertdir, "rediss://: verify the server with the CAs in DIR")
      ->type_name("DIR")
      ->envname("NXLOCK_CACERTDIR");
  auto* cert = app.add_option("--cert", g.cert, "rediss://: present this client certificate")
                   ->type_name("FILE")
                   ->envname("NXLOCK_CERT");
  auto* key = app.add_option("--key", g.key, "rediss://: the client certificate's private key")
                  ->type_name("FILE")
                  ->envname("NXLOCK_CERT_KEY");
  cert->needs(key);
  key->needs(cert);
  app.add_option("--sni", g.sni, "rediss://: the server name to send and check instead of HOST")
      ->type_name("NAME");
  app.add_flag("--insecure", g.insecure,
               "rediss://: do not verify the server's certificate or name (says so on stderr)");
  app.add_option("--sentinel-password-file", g.sentinel_password_file,
                 "redis+sentinel://: read the Sentinels' own password from FILE (or set "
                 "NXLOCK_SENTINEL_PASSWORD)")
      ->type_name("FILE");
  app.add_option("--replicas", g.replicas,
                 "Redis: every lock write waits until N replicas have it (WAIT); else exit 69")
      ->check(CLI::Range(0, k_max_replicas))
      ->type_name("N");
}

// Whether nxlock's own arguments (run-locked's command already split off) ask
// for --json: an error found while parsing them still answers in JSON.
bool names_json(int argc, char** argv) {
  const auto end = std::find(argv + 1, argv + argc, std::string_view("--"));
  return std::find(argv + 1, end, std::string_view("--json")) != end;
}

// A key or value that begins with '-' reads as an option (`nxlock lock -dash`):
// the advice that goes with the parse error, or "" when no such word is there.
std::string dash_advice(const CLI::App& app, std::string_view command, int argc, char** argv) {
  const CLI::App* sub = nullptr;
  try {
    sub = command.empty() ? nullptr : app.get_subcommand(std::string(command));
  } catch (const CLI::OptionNotFound&) {
  }
  const auto known = [&](const std::string& name) {
    return app.get_option_no_throw(name) != nullptr ||
           (sub != nullptr && sub->get_option_no_throw(name) != nullptr);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view token = argv[i];
    if (token == "--") {
      break;
    }
    // A word with two dashes is more likely a mistyped option than a key.
    if (token.size() < 2 || token[0] != '-' || token.starts_with("--")) {
      continue;
    }
    if (!known(std::string(token.substr(0, 2)))) {
      return "; a key or value that begins with '-' goes after '--': nxlock " +
             std::string(command.empty() ? "COMMAND" : command) + " [OPTIONS] -- " +
             util::escape(token) + " ...";
    }
  }
  return {};
}

// True if `token` names an option of `app` that takes a separate value.
bool takes_next_value(const CLI::App& app, std::string_view token) {
  std::string name(token);
  const bool is_long = name.rfind("--", 0) == 0;
  if (is_long) {
    if (name.find('=') != std::string::npos) {
      return false;  // --wait=5
    }
  } else if (name.size() > 2) {
    return false;  // -w5 carries its value; -nq is a cluster of flags
  }
  const auto* option = app.get_option_no_throw(name);
  return option != nullptr && option->get_items_expected_min() > 0;
}

// The index in argv of the command name: the first word after the global
// options (argc if there is none).
int find_command(const CLI::App& app, int argc, char** argv) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view token = argv[i];
    if (token == "--" || token.empty() || token[0] != '-') {
      break;
    }
    i += takes_next_value(app, token) ? 1 : 0;
  }
  return i;
}

// As with flock(1) and timeout(1), run-locked's options end at KEY, and
// everything after KEY (after one optional `--`) is the child's command line,
// untouched. CLI11 gets argv up to KEY; the rest is returned.
std::vector<std::string> split_child_command(const CLI::App& run_locked, int command_index,
                                             int& argc, char** argv) {
  const CLI::App& app = *run_locked.get_parent();
  int i = command_index + 1;
  for (; i < argc; ++i) {  // run-locked's options, up to KEY
    const std::string_view token = argv[i];
    if (token == "--") {
      ++i;
      break;
    }
    if (token.size() < 2 || token[0] != '-') {
      break;
    }
    // Its own options and the global ones that fall through to the app.
    i += takes_next_value(run_locked, token) || takes_next_value(app, token) ? 1 : 0;
  }
  if (i >= argc) {
    return {};  // no KEY: CLI11 reports it
  }
  std::vector<std::string> child(argv + i + 1, argv + argc);
  if (!child.empty() && child.front() == "--") {
    child.erase(child.begin());
  }
  argc = i + 1;
  return child;
}

std::optional<int> parse_with_cli11(int argc, char** argv, Context& context, ParsedArgs& parsed,
                                    Runner& runner) {
  // What may_name() looks at, for as long as this run() builds and parses options.
  g_parsed = {argc, argv};
  struct Unset {
    ~Unset() { g_parsed = {}; }
  } unset_parsed;

  // The standard streams, for CLI11 alone: see cli/cli11.hpp. Constructed on
  // first use and kept to the end, so that its output is flushed at exit.
  static const std::ios_base::Init k_streams;

  GlobalOptions& g = context.globals;
  CLI::App app{
      "nxlock: deadlock-safe locks for cron jobs and scripts, on one host or many "
      "(Redis or an embedded store)",
      "nxlock"};
  if (may_name("help")) {
    app.set_help_all_flag("--help-all", "Show help for every command");
  }
  if (may_name("version")) {
    app.set_version_flag("--version", version_text(), "Print the version and built-in backends");
  }
  app.require_subcommand(1);
  app.get_formatter()->label("SUBCOMMAND", "COMMAND");
  app.get_formatter()->label("Subcommands", "Commands");
  add_global_options(app, g, needs_backend_options());

  // Start-up is most of an invocation, and building every command's options
  // is most of start-up: when argv names a command, set up only that one.
  const int command_index = find_command(app, argc, argv);
  const std::string_view named = command_index < argc ? argv[command_index] : "";
  const bool known = std::any_of(std::begin(k_commands), std::end(k_commands),
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
  for (const Command& command : k_commands) {
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
    // `parsed` ends up holding the arguments of the command parsed, whichever
    // were set up: the callback runs for that one only.
    ParsedArgs own;
    auto setup_runner = command.setup(*sub, own);
    sub->callback([&runner, &parsed, setup_runner, own, name = command.name] {
      runner = setup_runner;
      parsed = own;
      parsed.command = name;
    });
  }

  try {
    if (named == "run-locked") {
      context.child_command = split_child_command(*run_locked, command_index, argc, argv);
    }
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: printed, exit 0
  } catch (const CLI::ParseError& e) {
    // CLI11 may fail on an option before it has stored --json's flag.
    context.out.json = g.json || names_json(argc, argv);
    context.out.error(k_exit_usage, "usage",
                      one_line(e.what()) + dash_advice(app, named, argc, argv) +
                          " (see 'nxlock --help')");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }
  return std::nullopt;
}

int run(int argc, char** argv) {
  // A server that goes away must be an error message, not a silent SIGPIPE death.
  signal(SIGPIPE, SIG_IGN);
  Context context;
  ParsedArgs parsed;
  Runner runner;
  if (auto fast = parse_fast(argc, argv, context.globals, parsed, context.child_command)) {
    runner = std::move(*fast);
  } else if (const auto status = parse_with_cli11(argc, argv, context, parsed, runner)) {
    return *status;
  }

  const GlobalOptions& g = context.globals;
  context.out.json = g.json;
  context.out.quiet = g.quiet;
  if (g.verbose) {
    util::set_trace_sink([](std::string_view line) {
      std::string text = "nxlock: ";
      text.append(line);
      text.push_back('\n');
      std::fwrite(text.data(), 1, text.size(), stderr);
    });
  }

  int status = k_exit_internal;
  try {
    status = runner(context);
  } catch (const util::Error& e) {
    status = exit_status_for(e.kind());
    context.out.error(status, e.subject(), e.reason());
  } catch (const std::exception& e) {
    status = k_exit_internal;
    context.out.error(status, "internal error", e.what());
  }
  context.out.flush(status);
  return status;
}

}  // namespace nxlock::cli
