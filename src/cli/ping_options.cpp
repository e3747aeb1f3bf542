// make_pinger: --ping's URL from the option, the environment or a file, {key} filled in.
#include "cli/ping_options.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

namespace {

using util::Error;
using util::ErrorKind;

// The first line of `path`, without its line end and surrounding blanks.
std::string read_url_file(const std::string& path) {
  const std::string what = "--ping-file '" + util::escape(path) + "'";
  util::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    throw Error(ErrorKind::usage, what, std::strerror(errno));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      throw Error(ErrorKind::usage, what, std::strerror(errno));
    }
    if (n == 0 || text.size() > 64 * 1024) {
      break;
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  text = text.substr(0, text.find('\n'));
  const std::size_t first = text.find_first_not_of(" \t\r");
  const std::size_t last = text.find_last_not_of(" \t\r");
  if (first == std::string::npos) {
    throw Error(ErrorKind::usage, what, "holds no URL on its first line");
  }
  return text.substr(first, last - first + 1);
}

}  // namespace

std::unique_ptr<run::Pinger> make_pinger(Context& ctx, const RunLockedArgs& args) {
  if (args.ping.empty() && args.ping_file.empty()) {
    return nullptr;
  }
  const std::string text = args.ping_file.empty() ? args.ping : read_url_file(args.ping_file);
  run::Pinger::Config config;
  config.target.url = run::parse_ping_url(run::expand_key(text, args.key));
  if (!args.ping_cacert.empty()) {
    if (access(args.ping_cacert.c_str(), R_OK) != 0) {
      throw Error(ErrorKind::usage, "--ping-cacert '" + util::escape(args.ping_cacert) + "'",
                  std::strerror(errno));
    }
    config.target.cacert = args.ping_cacert;
  }
  config.timeout = util::Micros(static_cast<std::int64_t>(args.ping_timeout * 1e6));
  config.note = [&ctx](std::string_view line) { ctx.out.note(line); };
  return std::make_unique<run::Pinger>(std::move(config));
}

}  // namespace nxlock::cli
