// The command line's words before CLI11 parses them: where the command is, where
// run-locked's child command begins, and advice for a parse error. Free of CLI11:
// what it must know of the options, it asks through the functions given.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
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
// CLI11 gets argv up to KEY (`argc` is cut there); the rest is returned. An
// empty COMMAND or -c STRING is an error, so that no lock is taken for it.
// `takes_value`: of run-locked's options and the global ones.
ChildCommand split_child_command(int command_index, int& argc, char** argv,
                                 const OptionQuery& takes_value);

// A key or value that begins with '-' reads as an option (`nxlock lock -dash`):
// the advice that goes with the parse error, or "" when no such word is there.
// `known`: whether a name is an option of `command` or a global one;
// `takes_value`: whether it takes a value (a word never taken for a key).
std::string dash_advice(std::string_view command, int argc, char** argv, const OptionQuery& known,
                        const OptionQuery& takes_value);

// The edit distance of `a` and `b`, a transposition counting as one edit
// ("wiat" is one from "wait").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The nearest of `candidates` to `word`, if it is near enough to be a typo
// of it (a distance under 2, or 3 for a word of 7 characters or more); "" if none is.
std::string nearest(std::string_view word, std::span<const std::string> candidates);

// flock(1)'s options that cannot map (man page, run-locked): -o/--close and
// -F/--no-fork. The advice for the first of them in argv before `--` (values
// of options skipped: `takes_value`), or "" when none is there.
std::string flock_option_advice(int argc, char** argv, const OptionQuery& takes_value);

// flock's descriptor and file forms (`flock 9`, `flock /path/f.lock CMD`) where
// nxlock expects a command: what to use instead, or "" if `word` is neither.
std::string flock_form_advice(std::string_view word);

// The first word before the command (argv[1], ..., argv[command_index - 1])
// that is no global option: "-n belongs after the command name" when it is
// an option of `command` (or of another command: they are named), or
// "unknown option --urll (did you mean --url?)". "" when every word there is
// a global option or its value. `global`: whether a name is a global option
// (the help and version flags among them); `takes_value`: whether it takes a
// value. `unknown_only`: options of a command are passed over (with their values).
std::string misplaced_option(int argc, char** argv, int command_index, std::string_view command,
                             const OptionQuery& global, const OptionQuery& takes_value,
                             bool unknown_only = false);

}  // namespace nxlock::cli
