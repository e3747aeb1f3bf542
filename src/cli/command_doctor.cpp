// doctor: checks the backend and says, one line per check, whether it is fit for locks.
#include <optional>
#include <string>
#include <vector>

#include "cli/command_args.hpp"
#include "cli/exit_status.hpp"
#include "store/diagnosis.hpp"

// Only the name: doctor adds no options, so this file needs none of CLI11's headers.
namespace CLI {
class App;
}

namespace nxlock::cli {

Runner setup_doctor(CLI::App& sub);

namespace {

using store::Check;

// "ok   server version 7.0.15", "FAIL maxmemory-policy allkeys-lru … — set …",
// "skip records …: why it could not be checked":
// the verdicts in a column of their own, so that a failure stands out.
std::string line_of(const Check& check, const std::string& server) {
  std::string line;
  switch (check.verdict) {
    case Check::Verdict::ok:
      line = "ok   ";
      break;
    case Check::Verdict::warn:
      line = "warn ";
      break;
    case Check::Verdict::fail:
      line = "FAIL ";
      break;
    case Check::Verdict::skip:
      line = "skip ";
      break;
  }
  if (!server.empty()) {
    line += server + ": ";
  }
  line += check.name;
  if (!check.detail.empty()) {
    line += " " + check.detail;
  }
  if (!check.advice.empty()) {
    line += " \u2014 " + check.advice;
  }
  return line;
}

int run_doctor(Context& ctx) {
  std::vector<std::string> urls = ctx.url_list();
  if (urls.empty()) {
    urls.emplace_back();  // the embedded store at its default path
  }
  const bool quorum = urls.size() > 1;
  nlohmann::json checks = nlohmann::json::array();
  std::string backends;
  bool fit = true;
  std::size_t usable = 0;
  std::optional<Check> stop;  // the first check that stopped a server's diagnosis
  std::string stopped_backend;
  for (const auto& url_text : urls) {
    auto [url, options] = ctx.prepare(url_text);
    options.key_prefix = ctx.globals.prefix;
    const store::Diagnosis diagnosis = store::diagnose(url, options);
    backends += (backends.empty() ? "" : " ") + diagnosis.backend;
    fit = fit && diagnosis.fit();
    if (const Check* stopped = diagnosis.stopped()) {
      if (!stop) {
        stop = *stopped;
        stopped_backend = diagnosis.backend;
      }
    } else {
      ++usable;
    }
    const std::string server = quorum ? diagnosis.backend : std::string();
    for (const Check& check : diagnosis.checks) {
      ctx.out.line(line_of(check, server));
      nlohmann::json entry = {{"name", check.name},
                              {"status", store::verdict_name(check.verdict)},
                              {"detail", check.detail},
                              {"advice", check.advice}};
      if (quorum) {
        entry["server"] = server;
      }
      checks.push_back(std::move(entry));
    }
  }
  ctx.out.field("backend", backends);
  ctx.out.field("fit", fit);
  ctx.out.field("checks", std::move(checks));
  // A quorum still locks while a majority of its servers can be used.
  if (stop && usable < urls.size() / 2 + 1) {
    const int status = exit_status_for(*stop->stop);
    // "file:///s: does not exist, ...", not "file:///s: path: /s: does not exist":
    // a detail that begins with the path the backend's URL ends in says it once.
    std::string reason = stop->name + ": " + stop->detail;
    const std::size_t colon = stop->detail.find(": ");
    if (colon != std::string::npos && colon > 0 &&
        stopped_backend.ends_with(stop->detail.substr(0, colon))) {
      reason = stop->detail.substr(colon + 2);
    }
    ctx.out.error(status, stopped_backend, reason);
    return status;
  }
  return fit ? k_exit_ok : k_exit_no;
}

}  // namespace

Runner setup_doctor(CLI::App& /*sub*/) {
  return run_doctor;
}

}  // namespace nxlock::cli
