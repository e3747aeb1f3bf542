// Options built only when the command line may name them: most of start-up is
// building CLI11 options (BENCHMARKS.md, "The command line's start-up"), and
// most are seldom used.
#pragma once

#include <string_view>

namespace nxlock::cli {

// While alive, may_name() looks at this command line (the one being parsed);
// with none, every option counts as named.
class LazyOptionsScope {
 public:
  LazyOptionsScope(int argc, char** argv);
  ~LazyOptionsScope();
  LazyOptionsScope(const LazyOptionsScope&) = delete;
  LazyOptionsScope& operator=(const LazyOptionsScope&) = delete;
};

// Whether the command line being parsed may name an option whose long name
// contains `word` (or short name is `letter`), or asks for help: a seldom-used
// option need not be built otherwise.
bool may_name(std::string_view word, char letter = 0);

// --prefix's environment variable: set, it builds --prefix too.
inline constexpr const char* k_prefix_env = "NXLOCK_PREFIX";
// --metrics-dir's (run-locked): set, it builds --metrics-dir too.
inline constexpr const char* k_metrics_dir_env = "NXLOCK_METRICS_DIR";

// Whether the global options that only rediss:// and redis+sentinel:// URLs or
// a replicated Redis use may be in play: named on the command line (see
// may_name()) or set in the environment.
bool needs_backend_options();

}  // namespace nxlock::cli
