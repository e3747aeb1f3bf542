// The command lines most invocations are, parsed without building CLI11's App.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command_args.hpp"
#include "cli/context.hpp"

namespace nxlock::cli {

// Whether the environment sets a global option other than -u (NXLOCK_PREFIX,
// NXLOCK_CACERT, …; set even empty): lazy_options.cpp, whose list of those
// variables also decides which options CLI11 builds, so that an option given
// an environment variable cannot be missed here.
bool option_environment_set();

// Parses the plain command lines
//   nxlock [-u URL | --url URL]... setnx|getset KEY VALUE
//   nxlock [-u URL | --url URL]... get KEY
//   nxlock [-u URL | --url URL]... run-locked [-n | --nonblock] KEY [--] COMMAND [ARG]...
// into `globals`, `parsed` and `child_command` exactly as CLI11 would
// (parse_with_cli11(); tests/unit/fast_path_test.cpp compares the two), and
// returns the command's runner. Building CLI11's App, its options and the
// subcommand is a large part of such an invocation (BENCHMARKS.md, "The
// command line's start-up").
//
// Returns nothing and changes nothing for every other command line: an empty
// word or one starting with '-' other than those above (help, every other
// option, `--` before KEY, a key or value that starts with '-'), a missing or
// extra operand, or an option's environment variable (NXLOCK_PREFIX,
// NXLOCK_CACERT, …) that is set. CLI11 parses those, with its messages.
std::optional<Runner> parse_fast(int argc, char** argv, GlobalOptions& globals, ParsedArgs& parsed,
                                 std::vector<std::string>& child_command);

}  // namespace nxlock::cli
