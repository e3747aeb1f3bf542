// Each command's setup: its options from the table and its operands, bound to
// the arguments its runner reads (the runners are in commands_kv.cpp,
// command_run.cpp, commands_lock.cpp and command_list.cpp).
#include <memory>

#include "cli/commands.hpp"

namespace nxlock::cli {

namespace {

// Binds KEY (and VALUE) of `sub` to a new KeyValueArgs.
std::shared_ptr<KeyValueArgs> add_key_value(CLI::App& sub, bool with_value) {
  auto args = std::make_shared<KeyValueArgs>();
  sub.add_option("KEY", args->key, "The key (use -- before one that starts with '-')")->required();
  if (with_value) {
    sub.add_option("VALUE", args->value, "The value")->required();
  }
  return args;
}

}  // namespace

Runner setup_setnx(CLI::App& sub) {
  return setnx_runner(add_key_value(sub, true));
}

Runner setup_get(CLI::App& sub) {
  return get_runner(add_key_value(sub, false));
}

Runner setup_getset(CLI::App& sub) {
  return getset_runner(add_key_value(sub, true));
}

Runner setup_del(CLI::App& sub) {
  auto keys = std::make_shared<std::vector<std::string>>();
  sub.add_option("KEY", *keys, "The keys to delete")->required();
  return del_runner(keys);
}

Runner setup_run_locked(CLI::App& sub) {
  constexpr std::string_view command = "run-locked";
  auto args = std::make_shared<RunLockedArgs>();
  add_lock_options(sub, command, args->lock);
  add_table_option(sub, command, "--command", args->shell_command);
  add_table_option(sub, command, "--no-renew", args->no_renew);
  add_table_option(sub, command, "--inherit-credentials", args->inherit_credentials);
  add_table_option(sub, command, "--on-lost", args->on_lost);
  add_table_option(sub, command, "--kill-after", args->kill_after);
  add_table_option(sub, command, "--hold", args->hold);
  add_table_option(sub, command, "--max-runtime", args->max_runtime);
  add_table_option(sub, command, "--metrics-dir", args->metrics_dir);
  add_table_option(sub, command, "--ping", args->ping);
  add_table_option(sub, command, "--ping-file", args->ping_file);
  add_table_option(sub, command, "--ping-cacert", args->ping_cacert);
  add_table_option(sub, command, "--ping-timeout", args->ping_timeout);
  add_table_option(sub, command, "--ping-on-busy", args->ping_on_busy);
  add_table_option(sub, command, "--replace", args->replace);
  sub.add_option("KEY", args->key, "The lock's key; options end here")->required();
  // COMMAND [ARGS...] is split off argv before CLI11 parses
  // (split_child_command()), so that nothing after KEY is ever taken for an
  // option of ours: this one is for --help.
  sub.add_option("COMMAND", args->help_only_command,
                 "The command to run (no shell; or -c STRING) and its arguments, passed "
                 "untouched");
  return run_locked_runner(args);
}

Runner setup_lock(CLI::App& sub) {
  auto args = std::make_shared<LockCommandArgs>();
  add_lock_options(sub, "lock", args->lock);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  return lock_runner(args);
}

Runner setup_unlock(CLI::App& sub) {
  constexpr std::string_view command = "unlock";
  auto args = std::make_shared<UnlockArgs>();
  auto* force = add_table_option(sub, command, "--force", args->force);
  add_table_option(sub, command, "--clock", args->clock);
  add_table_option(sub, command, "--slots", args->slots);
  add_table_option(sub, command, "--syslog", args->syslog);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  sub.add_option("VALUE", args->value, "The value `lock` printed")->excludes(force);
  return unlock_runner(args);
}

Runner setup_renew(CLI::App& sub) {
  constexpr std::string_view command = "renew";
  auto args = std::make_shared<RenewArgs>();
  add_table_option(sub, command, "--ttl", args->ttl);
  add_table_option(sub, command, "--clock", args->clock);
  add_table_option(sub, command, "--slots", args->slots);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  sub.add_option("VALUE", args->value, "The value `lock` (or the last renew) printed")->required();
  return renew_runner(args);
}

Runner setup_status(CLI::App& sub) {
  constexpr std::string_view command = "status";
  auto args = std::make_shared<StatusArgs>();
  add_table_option(sub, command, "--clock", args->clock);
  add_table_option(sub, command, "--slots", args->slots);
  sub.add_option("KEY", args->key, "The lock's key")->required();
  return status_runner(args);
}

Runner setup_list(CLI::App& sub) {
  auto args = std::make_shared<ListArgs>();
  add_table_option(sub, "list", "--expired", args->expired);
  add_table_option(sub, "list", "--waiters", args->waiters);
  sub.add_option("PATTERN", args->pattern,
                 "Glob on the lock's key, as Redis MATCH reads it (default: every lock)");
  return list_runner(args);
}

}  // namespace nxlock::cli
