// run-locked: take the lock, run COMMAND under it, release it, exit with COMMAND's status.
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "cli/acquire.hpp"
#include "cli/exit_status.hpp"
#include "run/supervisor.hpp"
#include "util/redact.hpp"

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

run::OnLost parse_on_lost(const std::string& text) {
  if (text == "kill") {
    return run::OnLost::kill;
  }
  if (text == "ignore") {
    return run::OnLost::ignore;
  }
  return run::OnLost::term;
}

// The child gets no password of ours unless asked (--inherit-credentials): it
// may print its environment (a CI log, a crash report) or pass it on further.
// A password-bearing NXLOCK_URL stays, redacted: an nxlock inside the job then
// fails loudly on authentication rather than quietly using another backend.
void drop_credentials_from_environment() {
  for (const char* name : {"NXLOCK_PASSWORD", "REDISCLI_AUTH", "NXLOCK_SENTINEL_PASSWORD"}) {
    unsetenv(name);
  }
  if (const char* url = std::getenv("NXLOCK_URL")) {
    const std::string redacted = util::redact_secrets(url);
    if (redacted != url) {
      setenv("NXLOCK_URL", redacted.c_str(), 1);
    }
  }
}

}  // namespace

Runner setup_run_locked(CLI::App& sub) {
  struct Args {
    std::string key;
    LockArgs lock;
    bool no_renew = false;
    bool inherit_credentials = false;
    std::string on_lost = "term";
    double kill_after = 10;
    double hold = 0;
    std::vector<std::string> help_only_command;
  };
  auto args = std::make_shared<Args>();
  add_lock_options(sub, args->lock);
  sub.add_flag("--no-renew", args->no_renew, "Do not renew the lock while COMMAND runs");
  sub.add_flag("--inherit-credentials", args->inherit_credentials,
               "Leave NXLOCK_PASSWORD, REDISCLI_AUTH and a password in NXLOCK_URL in "
               "COMMAND's environment (removed by default)");
  sub.add_option("--on-lost", args->on_lost,
                 "If the lock is lost: term (SIGTERM, then SIGKILL), kill, or ignore (warn)")
      ->check(CLI::IsMember({"term", "kill", "ignore"}))
      ->capture_default_str();
  sub.add_option("--kill-after", args->kill_after,
                 "Seconds between SIGTERM and SIGKILL when the lock is lost")
      ->check(duration_check(0, k_max_duration_seconds))
      ->type_name("SECONDS")
      ->capture_default_str();
  sub.add_option("--hold", args->hold,
                 "Keep the lock until SECONDS after it was taken, even if COMMAND ends sooner: "
                 "the same crontab line on many hosts then runs once per tick (a bit longer "
                 "than clock skew + cron's start jitter, shorter than the period)")
      ->check(duration_check(0, k_max_hold))
      ->type_name("SECONDS")
      ->capture_default_str();
  sub.add_option("KEY", args->key, "The lock's key; options end here")->required();
  // Only for --help: the command line is split off before CLI11 sees it.
  sub.add_option("COMMAND", args->help_only_command,
                 "The command to run (no shell) and its arguments, passed untouched");
  // COMMAND [ARGS...] is split off argv before CLI11 parses (app.cpp), so that
  // nothing after KEY is ever taken for an option of ours.

  return [args](Context& ctx) {
    const std::vector<std::string>& command = ctx.child_command;
    if (command.empty()) {
      throw util::Error(util::ErrorKind::usage, "run-locked", "no COMMAND to run after KEY");
    }

    auto& store = ctx.store();
    auto clock = make_clock(ctx, args->lock.clock);
    lock::Lock lock(store, *clock, ctx.key(args->key));
    run::SignalChannel signals;
    const auto acquired = acquire_for_cli(ctx, lock, args->lock, signals);
    if (!acquired.value) {
      return acquired.exit_status;
    }
    run::HeldLock held{*acquired.value,
                       acquired.valid_from + util::Micros(args->lock.ttl * 1'000'000), {}};
    // On the clock that made the lock decision (Redis TIME unless --clock local),
    // read after the lock was taken: the hold counts from no earlier than that.
    const util::Micros acquired_at = clock->now();

    run::RunOptions options;
    options.command = command;
    options.ttl = args->lock.ttl;
    options.renew = !args->no_renew;
    options.on_lost = parse_on_lost(args->on_lost);
    options.kill_after = util::Micros(static_cast<std::int64_t>(args->kill_after * 1e6));
    if (!args->inherit_credentials) {
      drop_credentials_from_environment();
    }
    options.holder = lock::describe_holder(held.value, getpid(), ctx.redact(join(command)),
                                           util::whole_seconds(acquired_at));

    run::RunOutcome outcome;
    try {
      // A lost lock is reported even under -q: it stopped the user's job.
      outcome = run::supervise(lock, held, options, signals,
                               [&ctx](std::string_view text) { ctx.out.warn(text); });
    } catch (...) {
      try {
        run::release_held(lock, held);  // never leave the lock behind on our own failure
      } catch (const util::Error&) {
      }
      throw;
    }

    // --hold keeps the lock of a job that ran; one that never started (126, 127)
    // did nothing worth holding for, and goes at once.
    const bool ran = outcome.ending == run::RunOutcome::Ending::exited ||
                     outcome.ending == run::RunOutcome::Ending::signaled;
    std::string kept_value;
    const auto release = [&] {
      if (ran && args->hold > 0) {
        const auto hold = util::Micros(static_cast<std::int64_t>(std::ceil(args->hold * 1e6)));
        return run::release_held(lock, held, [&](const std::string& value) {
          return lock.release_after(value, acquired_at + hold, kept_value);
        });
      }
      return run::release_held(lock, held);
    };
    if (!outcome.lost) {
      // The child's status is what cron reports; a failed release is a warning
      // (the lock then simply expires at its timestamp).
      try {
        const auto verdict = release();
        if (verdict != lock::Verdict::done) {
          ctx.out.note("lock '" + lock.key() + "': not released at exit (" +
                       (verdict == lock::Verdict::expired ? "expired" : "no longer ours") + ")");
        }
      } catch (const util::Error& e) {
        ctx.out.note(std::string("lock not released at exit: ") + e.what());
      }
    }
    run::wait_for_watchdog();  // after the release: the next holder need not wait on it

    ctx.out.bytes_field("key", lock.key());
    ctx.out.field("acquired", true);
    ctx.out.field("lost", outcome.lost);
    if (!kept_value.empty()) {
      ctx.out.field("hold_until", std::stoll(kept_value));
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
