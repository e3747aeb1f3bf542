// The option table: every option of nxlock, declared once. The CLI11 app is
// built from it (cli11_options.cpp), and `nxlock --dump-options` prints it for
// the tests that check the man page and the completions against it.
// Free of CLI11.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace nxlock::cli {

// What an option's value is, and so how it is checked.
enum class ValueKind {
  flag,     // no value
  text,     // any string
  nonempty, // any string but ""
  seconds,  // a finite decimal number of seconds in [min, max]
  whole,    // a whole number in [min, max] (a ttl, a count, an exit status)
  choice,   // one of `choices`
  refused,  // never valid here: the help says what to use instead (--timeout after lock)
};

struct OptionSpec {
  // "" for a global option (before or after the command name); else the
  // commands that have it, separated by spaces.
  std::string_view commands;
  std::string_view names;  // as CLI11 spells them: "-t,--ttl"
  ValueKind kind;
  std::string_view type_name;  // "SECONDS", "FILE"; "" for a flag
  std::string_view help;
  std::string_view env = {};      // the environment variable that sets it, if any
  std::string_view choices = {};  // kind choice: the values, separated by spaces
  double min = 0;                 // kinds seconds and whole: the bounds
  double max = 0;
  bool show_default = false;  // --help shows the default ("=60")
  // Left out of --help and not offered by the completions (which still know
  // that it takes a value): a deprecated name, or one refused with advice.
  bool hidden = false;
};

// Every option, in the order --help lists them.
std::span<const OptionSpec> option_table();

// Whether `spec` belongs to `command` ("" asks for the global options).
bool belongs_to(const OptionSpec& spec, std::string_view command);

// The long name of `spec` ("--ttl"), the last of its names.
std::string_view long_name(const OptionSpec& spec);

// The entry of `command` ("" for a global one) whose long name is `name`;
// throws std::logic_error if there is none (a setup naming an option the
// table lacks is a bug, caught by every test that builds that command).
const OptionSpec& option_spec(std::string_view command, std::string_view name);

// The table as text, one line per option and command (tab-separated: the
// command or "global", the names, the type name, the environment variable,
// the choices, "hidden" or ""): what `nxlock --dump-options` prints.
std::string dump_options();

}  // namespace nxlock::cli
