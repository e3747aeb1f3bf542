// Everything CLI11: the App, the global options, each command's options, the
// validators, and the parse. The one translation unit that includes CLI11: its
// validators are static objects, built at start-up in each one that does
// (BENCHMARKS.md, "The command line's start-up"), so what needs no CLI11 is kept out
// (command_line.cpp, lazy_options.cpp, command_table.cpp, app.cpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>

#include "cli/command_line.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/lazy_options.hpp"
#include "lock/lease_lock.hpp"
#include "store/make_store.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

namespace {

std::string version_text() {
  return std::string("nxlock ") + NXLOCK_VERSION + "\nbackends: " + store::builtin_backends();
}

// CLI11's messages are multi-line at times; every error is one line (man page, EXIT STATUS).
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

}  // namespace

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

void add_clock_option(CLI::App& sub, std::string& clock) {
  if (!may_name("clock")) {
    return;  // the default stands, as CLI11 would leave it
  }
  sub.add_option("--clock", clock,
                 "Whose clock decides expiry: server (Redis TIME) or local (this host)")
      ->check(CLI::IsMember({"server", "local"}))
      ->capture_default_str();
}

void add_slots_option(CLI::App& sub, int& slots) {
  if (!may_name("slots")) {
    return;
  }
  sub.add_option("--slots", slots,
                 "A counting semaphore: at most N holders of KEY at once, each in a slot "
                 "1..N (every user of KEY must give the same N)")
      ->check(CLI::Range(1, lock::k_max_slots))
      ->type_name("N");
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
  if (may_name("shared")) {
    sub.add_flag("--shared", args.shared,
                 "Hold the lock shared, as flock -s: any number of shared holders, or one "
                 "exclusive holder");
  }
  add_clock_option(sub, args.clock);
  add_slots_option(sub, args.slots);
}

// Every command's options and operands (the runners are in commands_kv.cpp,
// command_run.cpp and commands_lock.cpp).

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
                   "Seconds between SIGTERM and SIGKILL when the lock is lost or "
                   "--max-runtime comes")
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
  if (may_name("max-runtime")) {
    sub.add_option("--max-runtime", args->max_runtime,
                   "Stop COMMAND (SIGTERM, --kill-after, SIGKILL) SECONDS after it started, "
                   "release the lock and exit 124; 0: no limit")
        ->check(duration_check(0, static_cast<double>(k_max_ttl)))
        ->type_name("SECONDS");
  }
  if (may_name("metrics") || std::getenv(k_metrics_dir_env) != nullptr) {
    sub.add_option("--metrics-dir", args->metrics_dir,
                   "Write DIR/nxlock_KEY.prom for node_exporter's textfile collector")
        ->check(CLI::Validator(
            [](std::string& input) -> std::string {
              return input.empty() ? "the metrics directory must not be empty" : "";
            },
            "DIR"))
        ->type_name("DIR")
        ->envname(k_metrics_dir_env);
  }
  sub.add_option("KEY", args->key, "The lock's key; options end here")->required();
  // Only for --help: the command line is split off before CLI11 sees it.
  if (may_name("help")) {
    sub.add_option("COMMAND", args->help_only_command,
                   "The command to run (no shell) and its arguments, passed untouched");
  }
  // COMMAND [ARGS...] is split off argv before CLI11 parses
  // (split_child_command()), so that
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
  auto* force = sub.add_flag("-f,--force", args->force,
                             "Delete whatever the key holds (with --slots: every slot)");
  add_clock_option(sub, args->clock);
  add_slots_option(sub, args->slots);
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
  add_slots_option(sub, args->slots);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  sub.add_option("VALUE", args->value, "The value `lock` (or the last renew) printed")->required();
  return renew_runner(args);
}

Runner setup_status(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto args = std::make_shared<StatusArgs>();
  add_clock_option(sub, args->clock);
  add_slots_option(sub, args->slots);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  return status_runner(args);
}

Runner setup_list(CLI::App& sub, ParsedArgs& /*parsed*/) {
  auto args = std::make_shared<ListArgs>();
  sub.add_flag("--expired", args->expired, "Also list expired, abandoned locks");
  sub.add_flag("--waiters", args->waiters,
               "Also list each lock's waiters: pid, host, since when, kind");
  sub.add_option("PATTERN", args->pattern,
                 "Glob on the lock's key, as Redis MATCH reads it (default: every lock)");
  return list_runner(args);
}

namespace {

// The global options, on the app: each command falls through to them. -u
// always; those only rediss://, redis+sentinel:// or a replicated Redis use
// only if `backend_options` (needs_backend_options()).
void add_global_options(CLI::App& app, GlobalOptions& g, bool backend_options) {
  auto* url =
      app.add_option("-u,--url", g.urls,
                     "Backend: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS), "
                     "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,…]/MASTER[/DB], "
                     "unix:///PATH[?db=N], file:///PATH (default: the embedded "
                     "store) or etcd://[USER:PASSWORD@]HOST[:PORT][,…] (etcds://: TLS); repeated (or several in NXLOCK_URL), independent servers "
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

}  // namespace

std::optional<int> parse_with_cli11(int argc, char** argv, Context& context, ParsedArgs& parsed,
                                    Runner& runner) {
  // What may_name() looks at, for as long as this run() builds and parses options.
  const LazyOptionsScope lazy_options(argc, argv);

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
