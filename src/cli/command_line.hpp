// The command line's words before CLI11 parses them: where the command is, where
// run-locked's child command begins, and advice for a parse error. Free of CLI11:
// what it must know of the options, it asks through the functions given.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nxlock::cli {

// Whether `name` ("-w", "--wait") is an option (of a command, or a global one),
// or one that takes a value: CLI11 knows.
using OptionQuery = std::function<bool(const std::string& name)>;

// Whether nxlock's own arguments (run-locked's command already split off) ask
// for --json: an error found while parsing them still answers in JSON.
bool names_json(int argc, char** argv);

// The index in argv of the command name: the first word after the global
// options (argc if there is none). `takes_value`: of the global options.
int find_command(int argc, char** argv, const OptionQuery& takes_value);

// run-locked's child command line, or why the words after KEY are not one.
struct ChildCommand {
  std::vector<std::string> words;
  std::string error;  // a usage error; "" if none
};

// As with flock(1) and timeout(1), run-locked's options end at KEY, and
// everything after KEY (after one optional `--`) is the child's command line,
// untouched, but for flock's `KEY -c STRING`, which is `/bin/sh -c STRING`.
// CLI11 gets argv up to KEY (`argc` is cut there); the rest is returned.
// `takes_value`: of run-locked's options and the global ones.
ChildCommand split_child_command(int command_index, int& argc, char** argv,
                                 const OptionQuery& takes_value);

// A key or value that begins with '-' reads as an option (`nxlock lock -dash`):
// the advice that goes with the parse error, or "" when no such word is there.
// `known`: whether a name is an option of `command` or a global one;
// `takes_value`: whether it takes a value (a word never taken for a key).
std::string dash_advice(std::string_view command, int argc, char** argv, const OptionQuery& known,
                        const OptionQuery& takes_value);

}  // namespace nxlock::cli
