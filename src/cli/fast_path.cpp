// The fast path of the command line: see fast_path.hpp.
#include "cli/fast_path.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

namespace nxlock::cli {

namespace {

// A word that CLI11 takes as an operand wherever it stands: not an option, not
// `--`, and not empty (left to CLI11 and the command's own messages).
bool plain(const char* word) {
  return word[0] != '\0' && word[0] != '-';
}

}  // namespace

std::optional<Runner> parse_fast(int argc, char** argv, GlobalOptions& globals, ParsedArgs& parsed,
                                 std::vector<std::string>& child_command) {
  if (option_environment_set()) {
    return std::nullopt;  // an option's environment variable: CLI11 decides
  }
  std::vector<std::string> urls;
  int i = 1;
  while (i + 1 < argc && (std::strcmp(argv[i], "-u") == 0 || std::strcmp(argv[i], "--url") == 0)) {
    if (!plain(argv[i + 1])) {
      return std::nullopt;
    }
    urls.emplace_back(argv[i + 1]);
    i += 2;
  }
  if (urls.empty()) {
    // As CLI11 does: NXLOCK_URL stands in for an absent -u, and an empty
    // environment value is no value.
    const char* url = std::getenv("NXLOCK_URL");
    if (url != nullptr && *url != '\0') {
      urls.emplace_back(url);
    }
  }
  if (i >= argc) {
    return std::nullopt;  // no command: CLI11's message
  }
  const std::string_view command = argv[i];
  char** const operands = argv + i + 1;
  const int count = argc - i - 1;

  ParsedArgs result;
  std::vector<std::string> child;
  Runner runner;
  if (command == "setnx" || command == "getset" || command == "get") {
    const int wanted = command == "get" ? 1 : 2;
    if (count != wanted || !std::all_of(operands, operands + count, plain)) {
      return std::nullopt;
    }
    result.kv = std::make_shared<KeyValueArgs>();
    result.kv->key = operands[0];
    if (wanted == 2) {
      result.kv->value = operands[1];
    }
    runner = command == "setnx" ? setnx_runner(result.kv)
             : command == "get" ? get_runner(result.kv)
                                : getset_runner(result.kv);
  } else if (command == "run-locked") {
    result.run = std::make_shared<RunLockedArgs>();
    int k = 0;  // the index of KEY in operands
    if (count > 0 &&
        (std::strcmp(operands[0], "-n") == 0 || std::strcmp(operands[0], "--nonblock") == 0)) {
      result.run->lock.nonblock = true;
      k = 1;
    }
    if (k >= count || !plain(operands[k])) {
      return std::nullopt;
    }
    result.run->key = operands[k];
    // COMMAND, untouched but for one `--` before it (split_child_command()).
    int first = k + 1;
    if (first < count && std::strcmp(operands[first], "--") == 0) {
      ++first;
    }
    if (first >= count) {
      return std::nullopt;  // no COMMAND: the runner's message, by way of CLI11
    }
    child.assign(operands + first, operands + count);
    runner = run_locked_runner(result.run);
  } else {
    return std::nullopt;
  }
  result.command = command;
  globals.urls = std::move(urls);
  parsed = std::move(result);
  child_command = std::move(child);
  return runner;
}

}  // namespace nxlock::cli
