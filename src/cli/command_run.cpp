// run-locked: take the lock, run COMMAND under it, release it, exit with COMMAND's status.
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <memory>

#include "cli/acquire.hpp"
#include "cli/exit_status.hpp"
#include "run/run_locked.hpp"
#include "util/escape.hpp"

namespace nxlock::cli {

namespace {

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) {
    text += text.empty() ? "" : " ";
    text += word;
  }
  return text;
}

// The largest --hold: as for a ttl (2^40 seconds, some 35 thousand years).
constexpr double k_max_hold = static_cast<double>(std::int64_t{1} << 40);

// `seconds` (finite, 0 to k_max_hold: checked by --hold) in microseconds, rounded up.
// Not std::ceil: it was nxlock's only use of libm, and loading libm.so cost every
// invocation 27 k instructions and 6 page faults (BENCHMARKS.md).
util::Micros ceil_micros(double seconds) {
  const double micros = seconds * 1e6;
  // Truncation is exact below 2^63 (2^40 s is 1.1e18 µs) and rounds toward zero.
  auto whole = static_cast<std::int64_t>(micros);
  if (static_cast<double>(whole) < micros) {
    ++whole;
  }
  return util::Micros(whole);
}

run::OnLost parse_on_lost(const std::string& text) {
  if (text == "kill") {
    return run::OnLost::kill;
  }
  if (text == "ignore") {
    return run::OnLost::ignore;
  }
  return run::OnLost::term;
}

// The lost lock in words, as it is found (even under -q: it stopped the user's job).
void say_lost(Context& ctx, const std::string& key, const run::Loss& loss, run::OnLost action) {
  std::string why = loss.verdict ? verdict_reason(*loss.verdict) : "";
  if (!loss.detail.empty()) {
    why += why.empty() ? loss.detail : " (" + loss.detail + ")";
  }
  ctx.out.warn("lock '" + util::escape(key) + "' lost: " + why);
  switch (action) {
    case run::OnLost::term:
      ctx.out.warn("stopping the job (SIGTERM, SIGKILL after the grace period)");
      break;
    case run::OnLost::kill:
      ctx.out.warn("stopping the job (SIGKILL)");
      break;
    case run::OnLost::ignore:
      ctx.out.warn("the job keeps running (--on-lost ignore)");
      break;
  }
}

}  // namespace

Runner setup_run_locked(CLI::App& sub, ParsedArgs& parsed) {
  parsed.run = std::make_shared<RunLockedArgs>();
  const auto& args = parsed.run;
  add_lock_options(sub, args->lock);
  // Each seldom-used option only if the command line may name it (may_name()).
  if (may_name("renew")) {
    sub.add_flag("--no-renew", args->no_renew, "Do not renew the lock while COMMAND runs");
  }
  if (may_name("inherit")) {
    sub.add_flag("--inherit-credentials", args->inherit_credentials,
                 "Leave NXLOCK_PASSWORD, REDISCLI_AUTH and a password in NXLOCK_URL in "
                 "COMMAND's environment (removed by default)");
  }
  if (may_name("on-lost")) {
    sub.add_option("--on-lost", args->on_lost,
                   "If the lock is lost: term (SIGTERM, then SIGKILL), kill, or ignore (warn)")
        ->check(CLI::IsMember({"term", "kill", "ignore"}))
        ->capture_default_str();
  }
  if (may_name("kill-after")) {
    sub.add_option("--kill-after", args->kill_after,
                   "Seconds between SIGTERM and SIGKILL when the lock is lost")
        ->check(duration_check(0, k_max_duration_seconds))
        ->type_name("SECONDS")
        ->capture_default_str();
  }
  if (may_name("hold")) {
    sub.add_option("--hold", args->hold,
                   "Keep the lock until SECONDS after it was taken, even if COMMAND ends sooner: "
                   "the same crontab line on many hosts then runs once per tick (a bit longer "
                   "than clock skew + cron's start jitter, shorter than the period)")
        ->check(duration_check(0, k_max_hold))
        ->type_name("SECONDS")
        ->capture_default_str();
  }
  sub.add_option("KEY", args->key, "The lock's key; options end here")->required();
  // Only for --help: the command line is split off before CLI11 sees it.
  if (may_name("help")) {
    sub.add_option("COMMAND", args->help_only_command,
                   "The command to run (no shell) and its arguments, passed untouched");
  }
  // COMMAND [ARGS...] is split off argv before CLI11 parses (app.cpp), so that
  // nothing after KEY is ever taken for an option of ours.
  return run_locked_runner(args);
}

Runner run_locked_runner(std::shared_ptr<RunLockedArgs> args) {
  return [args](Context& ctx) {
    const std::vector<std::string>& command = ctx.child_command;
    if (command.empty()) {
      throw util::Error(util::ErrorKind::usage, "run-locked", "no COMMAND to run after KEY");
    }

    CliLock cli_lock(ctx, args->key, args->lock);
    if (!cli_lock.acquire()) {
      return cli_lock.exit_status();
    }
    lock::Lockable& lock = cli_lock.lock();
    run::HeldLock held{
        *cli_lock.value(), cli_lock.valid_from() + util::Micros(args->lock.ttl * 1'000'000), {}};

    run::RunOptions options;
    options.command = command;
    options.ttl = args->lock.ttl;
    options.renew = !args->no_renew;
    options.on_lost = parse_on_lost(args->on_lost);
    options.kill_after = util::Micros(static_cast<std::int64_t>(args->kill_after * 1e6));
    options.inherit_credentials = args->inherit_credentials;
    options.hold = ceil_micros(args->hold);
    // On the clock that made the lock decision (Redis TIME unless --clock local),
    // read after the lock was taken: the hold counts from no earlier than that.
    options.acquired_at = cli_lock.clock().now();
    options.holder = lock::describe_holder(held.value, getpid(), ctx.redact(join(command)),
                                           util::whole_seconds(options.acquired_at));

    run::Reporter reporter;
    reporter.warn = [&ctx](std::string_view text) { ctx.out.warn(text); };
    reporter.lost = [&ctx, &lock](const run::Loss& loss, run::OnLost action) {
      say_lost(ctx, lock.key(), loss, action);
    };
    const auto ran = run::run_locked(lock, held, options, cli_lock.signals(), reporter);
    const run::RunOutcome& outcome = ran.job;
    if (!ran.release_error.empty()) {
      ctx.out.note("lock '" + util::escape(lock.key()) +
                   "': not released at exit: " + ran.release_error);
    } else if (ran.released && *ran.released != lock::Verdict::done) {
      ctx.out.note("lock '" + util::escape(lock.key()) +
                   "': not released at exit: " + verdict_reason(*ran.released));
    }

    ctx.out.bytes_field("key", lock.key());
    ctx.out.field("acquired", true);
    ctx.out.field("fence",
                  cli_lock.fence() > 0 ? nlohmann::json(cli_lock.fence()) : nlohmann::json());
    ctx.out.field("lost", outcome.lost);
    if (!ran.kept_value.empty()) {
      ctx.out.field("hold_until", std::stoll(ran.kept_value));
    }
    switch (outcome.ending) {
      case run::RunOutcome::Ending::not_found:
        ctx.out.error(outcome.status, command.front(), "command not found");
        return outcome.status;
      case run::RunOutcome::Ending::not_executable:
        ctx.out.error(outcome.status, command.front(), outcome.detail);
        return outcome.status;
      case run::RunOutcome::Ending::exited:
      case run::RunOutcome::Ending::signaled:
        break;
    }
    ctx.out.field("child_status", outcome.status);
    if (outcome.lost && options.on_lost != run::OnLost::ignore) {
      return k_exit_lock_lost;
    }
    return outcome.status;
  };
}

}  // namespace nxlock::cli
