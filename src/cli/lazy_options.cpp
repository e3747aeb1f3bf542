// Lazy options: which options the command line being parsed may name.
#include "cli/lazy_options.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "cli/fast_path.hpp"

namespace nxlock::cli {

namespace {

// The command line run() is parsing. Building a CLI11 option has a cost, and
// CLI11 compares each new one with all before it (BENCHMARKS.md, "The command
// line's start-up"): options that are seldom used are left out when this
// command line cannot name them (may_name()). Unset (no run() under way), every
// option is built.
struct ParsedArgv {
  int argc = 0;
  char** argv = nullptr;
};
ParsedArgv g_parsed;

// The global options that only rediss:// and redis+sentinel:// URLs or a
// replicated Redis use: the words that name them, and their environment
// variables (beside option_environment_set(), which the fast path asks).
// Together they were a large part of a plain `setnx`'s start-up
// (BENCHMARKS.md, "The command line's start-up").
constexpr std::string_view k_backend_option_words[] = {"cacert",   "cert",     "key",     "sni",
                                                       "insecure", "sentinel", "replicas"};
constexpr const char* k_backend_option_env[] = {"NXLOCK_CACERT", "NXLOCK_CACERTDIR", "NXLOCK_CERT",
                                                "NXLOCK_CERT_KEY"};

bool backend_option_environment_set() {
  return std::any_of(std::begin(k_backend_option_env), std::end(k_backend_option_env),
                     [](const char* name) { return std::getenv(name) != nullptr; });
}

}  // namespace

LazyOptionsScope::LazyOptionsScope(int argc, char** argv) {
  g_parsed = {argc, argv};
}

LazyOptionsScope::~LazyOptionsScope() {
  g_parsed = {};
}

// False only if no word of the command line that starts with '-' contains
// `word` (the option's long name, or a distinctive part of it), no single-dash
// word (a short option or a cluster such as -nE5) contains `letter`, and none
// asks for help (--help, --help-all, or -h alone or in a cluster such as -qh:
// help lists every option). Then CLI11 parses the command line to the same
// result and the same messages without the option. Conservative: the words of
// run-locked's child command count too.
bool may_name(std::string_view word, char letter) {
  if (g_parsed.argv == nullptr) {
    return true;
  }
  for (int i = 1; i < g_parsed.argc; ++i) {
    const std::string_view token = g_parsed.argv[i];
    if (token.size() < 2 || token[0] != '-') {
      continue;
    }
    if (token.find(word) != std::string_view::npos ||
        token.find("help") != std::string_view::npos) {
      return true;
    }
    if (token[1] != '-' && (token.find('h') != std::string_view::npos ||
                            (letter != 0 && token.find(letter) != std::string_view::npos))) {
      return true;
    }
  }
  return false;
}

bool needs_backend_options() {
  return backend_option_environment_set() ||
         std::any_of(std::begin(k_backend_option_words), std::end(k_backend_option_words),
                     [](std::string_view word) { return may_name(word); });
}

bool option_environment_set() {
  return std::getenv(k_prefix_env) != nullptr || std::getenv(k_metrics_dir_env) != nullptr ||
         backend_option_environment_set();
}

}  // namespace nxlock::cli
