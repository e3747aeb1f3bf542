// The command table: see command_table.hpp.
#include "cli/command_table.hpp"

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
    {"list", "List the locks held now: holder, since, until, fence, waiters",
     "nxlock list 'backup-*'", setup_list},
    {"run-locked", "Run COMMAND while holding the lock KEY, then release it",
     "nxlock run-locked -n nightly-backup /usr/local/bin/backup", setup_run_locked},
    {"doctor", "Check that the backend is fit for locks, and say what to fix",
     "nxlock -u redis://db1:6379 doctor", setup_doctor},
};

}  // namespace

std::span<const Command> command_table() {
  return k_commands;
}

std::string command_names() {
  std::string names;
  for (const Command& command : k_commands) {
    names += names.empty() ? "" : ", ";
    names += command.name;
  }
  return names;
}

}  // namespace nxlock::cli
