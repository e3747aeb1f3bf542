// The nxlock command line: parse, dispatch, and turn every outcome into an exit status.
#pragma once

#include <optional>

#include "cli/command_args.hpp"
#include "cli/context.hpp"

namespace nxlock::cli {

// Runs nxlock with the given arguments; returns the process exit status.
int run(int argc, char** argv);

// Parses argv with CLI11 (cli11_app.cpp) into `context` (its globals and
// child_command), `parsed` and `runner`: every command line the fast path
// (fast_path.hpp) does not take. Returns the exit status if the invocation
// ends here: help or --version printed (0), a usage error reported (64).
std::optional<int> parse_with_cli11(int argc, char** argv, Context& context, ParsedArgs& parsed,
                                    Runner& runner);

}  // namespace nxlock::cli
