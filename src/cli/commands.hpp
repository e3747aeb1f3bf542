// The option helpers and bounds the commands' CLI11 setups share (cli11_app.cpp).
// Includes CLI11: only cli11_app.cpp may include this (see there).
#pragma once

#include "cli/cli11.hpp"

#include <cstdint>
#include <string>

#include "cli/app.hpp"
#include "cli/command_args.hpp"
#include "cli/command_table.hpp"
#include "cli/context.hpp"

namespace nxlock::cli {

// Adds the options shared by lock and run-locked (LockArgs).
void add_lock_options(CLI::App& sub, LockArgs& args);

// Durations (--wait, --timeout, --kill-after) are at most this many seconds
// (about 11 days): every deadline and poll timeout then fits its type.
inline constexpr double k_max_duration_seconds = 1e6;
// A ttl (whole seconds) has the same bound, so every lock a user can ask for
// fits the durations the lock and the watchdog compute from it.
inline constexpr std::int64_t k_max_ttl = 1'000'000;
// --replicas: far more than any deployment has, small enough to say in a message.
inline constexpr int k_max_replicas = 1000;
// Below a millisecond a socket timeout rounds to zero, which means "none".
inline constexpr double k_min_timeout_seconds = 0.001;

// Checks a duration option: a finite number of seconds in [min, max]; the
// message names the bounds (a usage error, exit 64).
CLI::Validator duration_check(double min_seconds, double max_seconds);
void add_clock_option(CLI::App& sub, std::string& clock);
// --slots N (lock, run-locked, unlock, renew, status), 1 to lock::k_max_slots.
void add_slots_option(CLI::App& sub, int& slots);

}  // namespace nxlock::cli
