// The command line's words before CLI11 parses them: see command_line.hpp.
#include "cli/command_line.hpp"

#include <algorithm>
#include <vector>

#include "cli/option_table.hpp"
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
  // `run-locked KEY "$CMD"` with CMD unset: refused before any lock is taken,
  // as `-c ''` is, not run as a program named "" once it is.
  const auto empty = [](const std::string& word) {
    return word.empty() ? "the empty COMMAND is refused (an unset variable in a script?)"
                        : "";
  };
  if (!child.empty() && child.front() == "--") {
    child.erase(child.begin());
    // `KEY -- -c x` runs a program named -c
    return {child, child.empty() ? std::string() : empty(child.front())};
  }
  if (!child.empty() && child.front() == "-c") {
    if (child.size() != 2) {
      return {{}, "-c after KEY takes one STRING, the whole shell command: "
                  "run-locked KEY -c 'CMD; CMD'"};
    }
    return {{"/bin/sh", "-c", child[1]}, child[1].empty() ? "-c: the empty STRING is refused (an unset variable in a script?)" : ""};
  }
  return {child, child.empty() ? std::string() : empty(child.front())};
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

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) {
    for (std::size_t j = 0; j <= b.size(); ++j) {
      if (i == 0 || j == 0) {
        d[i][j] = i + j;
        continue;
      }
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string nearest(std::string_view word, std::span<const std::string> candidates) {
  std::string best;
  std::size_t best_distance = word.size() < 7 ? 2 : 3;  // "--wiat": 1 from "--wait"
  for (const std::string& candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string flock_option_advice(int argc, char** argv, const OptionQuery& takes_value) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view token = argv[i];
    if (token == "--") {
      break;
    }
    if (token.starts_with("-") && takes_next_value(token, takes_value)) {
      ++i;  // its value
      continue;
    }
    const std::string shown(token);
    if (token == "-o" || token == "--close") {
      return "flock's " + shown +
             " is refused: drop it (it closes the lock's descriptor in the job, and nxlock's "
             "job never holds the lock through a descriptor)";
    }
    if (token == "-F" || token == "--no-fork") {
      return "flock's " + shown +
             " (no fork) is refused: drop it (nxlock forks the job, and renews the lock "
             "while it runs)";
    }
  }
  return {};
}

std::string flock_form_advice(std::string_view word) {
  const std::string shown = "'" + util::escape(word) + "' is not an nxlock command: ";
  const bool descriptor =
      !word.empty() && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (descriptor) {
    return shown +
           "flock's descriptor form (flock 9, on a file the shell opened) cannot map, as no file "
           "holds the lock; run the commands under it with 'nxlock run-locked KEY COMMAND', or "
           "re-run the whole script under it (nxlock(1), EXAMPLES)";
  }
  if (word.find('/') != std::string_view::npos || word.ends_with(".lock")) {
    return shown +
           "flock's file form (flock FILE COMMAND) is 'nxlock run-locked KEY COMMAND' here, "
           "with any name for KEY (the path too), and KEY -c STRING as flock's -c";
  }
  return {};
}

std::string misplaced_option(int argc, char** argv, int command_index, std::string_view command,
                             const OptionQuery& global, const OptionQuery& takes_value,
                             bool unknown_only) {
  for (int i = 1; i < command_index && i < argc; ++i) {
    const std::string_view token = argv[i];
    if (token == "--") {
      break;
    }
    if (token.size() < 2 || token[0] != '-') {
      continue;  // a value
    }
    const bool is_long = token.starts_with("--");
    if (!is_long && token.size() > 2) {
      continue;  // -qv, -w5: CLI11 judges a cluster
    }
    const std::string name(token.substr(0, token.find('=')));
    if (global(name)) {
      i += takes_next_value(token, takes_value) ? 1 : 0;
      continue;
    }
    std::vector<std::string_view> owners;
    bool owned_takes_value = false;
    for (const OptionSpec& spec : option_table()) {
      std::string_view names = spec.names;
      bool named = false;
      while (!names.empty()) {
        const std::size_t comma = names.find(',');
        named = named || names.substr(0, comma) == name;
        names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
      }
      owned_takes_value = owned_takes_value || (named && !spec.type_name.empty());
      std::string_view rest = spec.commands;
      while (named && !rest.empty()) {
        const std::size_t space = rest.find(' ');
        const std::string_view owner = rest.substr(0, space);
        if (std::find(owners.begin(), owners.end(), owner) == owners.end()) {
          owners.push_back(owner);
        }
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      }
    }
    if (!owners.empty() && unknown_only) {
      i += owned_takes_value && token.find('=') == std::string_view::npos ? 1 : 0;
      continue;
    }
    if (!owners.empty()) {
      const bool ours = std::find(owners.begin(), owners.end(), command) != owners.end();
      std::string list;
      for (const std::string_view owner : owners) {
        list += (list.empty() ? "" : ", ") + std::string(owner);
      }
      return name + " is an option of " + list + ", not a global one: it goes after the command " +
             "name (nxlock " + std::string(ours ? command : owners.front()) + " " + name + " ...)";
    }
    if (name == "-V") {
      return "unknown option -V (did you mean --version?)";
    }
    std::vector<std::string> candidates = {"--help", "--help-all", "--version"};
    for (const OptionSpec& spec : option_table()) {
      if (spec.commands.empty() && !spec.hidden) {
        candidates.emplace_back(long_name(spec));
      }
    }
    const std::string best = is_long ? nearest(name, candidates) : std::string();
    return "unknown option " + util::escape(name) +
           (best.empty() ? "" : " (did you mean " + best + "?)");
  }
  return {};
}

}  // namespace nxlock::cli
