// Acquiring a lock from the command line: clock choice, waiting, the busy report.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "lock/lock.hpp"
#include "run/signals.hpp"

namespace nxlock::cli {

// The clock lock decisions use: the server's for Redis unless --clock local.
std::unique_ptr<lock::Clock> make_clock(Context& ctx, const std::string& clock_option);

// The outcome of acquire_for_cli: the value on success, else the exit status to use.
struct CliAcquire {
  std::optional<std::string> value;
  int exit_status = 0;
  util::Micros valid_from{0};  // acquired: see lock::Attempt::valid_from
};

// Acquires as `lock` and `run-locked` do. When busy or timed out, explains on
// stderr until when and by whom the lock is held, and gives -E's status (75).
// A signal while waiting ends the wait: no lock is taken, status 128+N.
CliAcquire acquire_for_cli(Context& ctx, lock::Lock& lock, const LockArgs& args,
                           run::SignalChannel& signals);

// "in 42s" / "3s ago" style distance between two Unix times.
std::string describe_distance(std::int64_t from, std::int64_t to);

}  // namespace nxlock::cli
