// The command line's words before CLI11 parses them: see command_line.hpp.
#include "cli/command_line.hpp"

#include <algorithm>

#include "util/escape.hpp"

namespace nxlock::cli {

namespace {

// True if `token` names an option that takes a separate value.
bool takes_next_value(std::string_view token, const OptionQuery& takes_value) {
  std::string name(token);
  const bool is_long = name.rfind("--", 0) == 0;
  if (is_long) {
    if (name.find('=') != std::string::npos) {
      return false;  // --wait=5
    }
  } else if (name.size() > 2) {
    return false;  // -w5 carries its value; -nq is a cluster of flags
  }
  return takes_value(name);
}

}  // namespace

bool names_json(int argc, char** argv) {
  const auto end = std::find(argv + 1, argv + argc, std::string_view("--"));
  return std::find(argv + 1, end, std::string_view("--json")) != end;
}

int find_command(int argc, char** argv, const OptionQuery& takes_value) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view token = argv[i];
    if (token == "--" || token.empty() || token[0] != '-') {
      break;
    }
    i += takes_next_value(token, takes_value) ? 1 : 0;
  }
  return i;
}

ChildCommand split_child_command(int command_index, int& argc, char** argv,
                                 const OptionQuery& takes_value) {
  int i = command_index + 1;
  for (; i < argc; ++i) {  // run-locked's options, up to KEY
    const std::string_view token = argv[i];
    if (token == "--") {
      ++i;
      break;
    }
    if (token.size() < 2 || token[0] != '-') {
      break;
    }
    // Its own options and the global ones that fall through to the app.
    i += takes_next_value(token, takes_value) ? 1 : 0;
  }
  if (i >= argc) {
    return {};  // no KEY: CLI11 reports it
  }
  std::vector<std::string> child(argv + i + 1, argv + argc);
  argc = i + 1;
  if (!child.empty() && child.front() == "--") {
    child.erase(child.begin());
    return {std::move(child), {}};  // `KEY -- -c x` runs a program named -c
  }
  if (!child.empty() && child.front() == "-c") {
    if (child.size() != 2) {
      return {{}, "-c after KEY takes one STRING, the whole shell command: "
                  "run-locked KEY -c 'CMD; CMD'"};
    }
    return {{"/bin/sh", "-c", child[1]}, {}};
  }
  return {std::move(child), {}};
}

std::string dash_advice(std::string_view command, int argc, char** argv, const OptionQuery& known,
                        const OptionQuery& takes_value) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view token = argv[i];
    if (token == "--") {
      break;
    }
    if (token.starts_with("-") && takes_next_value(token, takes_value)) {
      ++i;  // its value (`--kill-after -1`): not a key, whatever it starts with
      continue;
    }
    // A word with two dashes is more likely a mistyped option than a key.
    if (token.size() < 2 || token[0] != '-' || token.starts_with("--")) {
      continue;
    }
    if (!known(std::string(token.substr(0, 2)))) {
      return "; a key or value that begins with '-' goes after '--': nxlock " +
             std::string(command.empty() ? "COMMAND" : command) + " [OPTIONS] -- " +
             util::escape(token) + " ...";
    }
  }
  return {};
}

}  // namespace nxlock::cli
