// The nxlock command line: CLI11, then the command; the one place where
// errors become exit statuses.
#include "cli/app.hpp"

#include <fcntl.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "cli/exit_status.hpp"
#include "cli/url_checks.hpp"
#include "util/trace.hpp"

namespace nxlock::cli {

namespace {

// --json-fd N: N must be open; above stderr it is closed on exec, so that the
// job run-locked starts does not inherit it (and a reader of the pipe sees its
// end when nxlock exits, not when the job does). Returns 64 if it is not open.
std::optional<int> open_json_fd(Context& context) {
  const int fd = context.globals.json_fd;
  const int flags = fcntl(fd, F_GETFD);
  if (flags < 0) {
    context.out.error(k_exit_usage, "--json-fd " + std::to_string(fd),
                      "descriptor " + std::to_string(fd) +
                          " is not open: open it for nxlock, as in 3>FILE or 3>&1");
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }
  if (fd > 2) {
    fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
  context.out.json_fd = fd;
  return std::nullopt;
}

}  // namespace

int run(int argc, char** argv) {
  // A server that goes away must be an error message, not a silent SIGPIPE death.
  signal(SIGPIPE, SIG_IGN);
  Context context;
  Runner runner;
  if (const auto status = parse_command_line(argc, argv, context, runner)) {
    return *status;
  }

  const GlobalOptions& g = context.globals;
  context.out.json = g.json || g.json_fd >= 0;
  context.out.quiet = g.quiet;
  if (g.json_fd >= 0) {
    if (const auto status = open_json_fd(context)) {
      return *status;
    }
  }
  // An empty -u or NXLOCK_URL: refused before anything is opened or taken.
  if (const auto refused = refuse_urls(g.urls, std::getenv("NXLOCK_URL"))) {
    context.out.error(k_exit_usage, refused->subject(), refused->reason());
    context.out.flush(k_exit_usage);
    return k_exit_usage;
  }
  if (g.verbose) {
    util::set_trace_sink([](std::string_view line) {
      std::string text = "nxlock: ";
      text.append(line);
      text.push_back('\n');
      std::fwrite(text.data(), 1, text.size(), stderr);
    });
    // Which backend, and where: a fleet's job that fell back to the per-host
    // store shows it here. A URL that does not parse is the command's to report.
    try {
      util::trace("backend: " + backend_summary(context.url_list()));
    } catch (const util::Error&) {
    }
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
