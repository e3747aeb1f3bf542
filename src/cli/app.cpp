// The nxlock command line: the fast path or CLI11, then the command; the one
// place where errors become exit statuses.
#include "cli/app.hpp"

#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "cli/exit_status.hpp"
#include "cli/fast_path.hpp"
#include "util/trace.hpp"

namespace nxlock::cli {

int run(int argc, char** argv) {
  // A server that goes away must be an error message, not a silent SIGPIPE death.
  signal(SIGPIPE, SIG_IGN);
  Context context;
  ParsedArgs parsed;
  Runner runner;
  if (auto fast = parse_fast(argc, argv, context.globals, parsed, context.child_command)) {
    runner = std::move(*fast);
  } else if (const auto status = parse_with_cli11(argc, argv, context, parsed, runner)) {
    return *status;
  }

  const GlobalOptions& g = context.globals;
  context.out.json = g.json;
  context.out.quiet = g.quiet;
  if (g.verbose) {
    util::set_trace_sink([](std::string_view line) {
      std::string text = "nxlock: ";
      text.append(line);
      text.push_back('\n');
      std::fwrite(text.data(), 1, text.size(), stderr);
    });
  }

  int status = k_exit_internal;
  try {
    status = runner(context);
  } catch (const util::Error& caught) {
    const util::Error e = context.with_advice(caught);
    status = exit_status_for(e.kind());
    context.out.error(status, e.subject(), e.reason());
  } catch (const std::exception& e) {
    status = k_exit_internal;
    context.out.error(status, "internal error", e.what());
  }
  context.out.flush(status);
  return status;
}

}  // namespace nxlock::cli
