// The nxlock command line: parse, dispatch, and turn every outcome into an exit status.
#pragma once

#include <optional>

#include "cli/command_args.hpp"
#include "cli/context.hpp"

namespace nxlock::cli {

// Runs nxlock with the given arguments; returns the process exit status.
int run(int argc, char** argv);

// Parses argv with CLI11 (cli11_app.cpp) into `context` (its globals and
// child_command) and `runner`, the named command's. Returns the exit status if
// the invocation ends here: help or --version printed (0), a usage error
// reported (64).
std::optional<int> parse_command_line(int argc, char** argv, Context& context, Runner& runner);

}  // namespace nxlock::cli
