// run-locked: take the lock, run COMMAND under it, release it, exit with COMMAND's status.
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>

#include "cli/acquire.hpp"
#include "cli/command_args.hpp"
#include "cli/lock_words.hpp"
#include "cli/event_log.hpp"
#include "cli/exit_status.hpp"
#include "cli/ping_options.hpp"
#include "cli/replace.hpp"
#include "run/metrics.hpp"
#include "run/run_locked.hpp"
#include "util/escape.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

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

// `seconds` (finite, 0 to 2^40: checked by --hold) in microseconds, rounded up.
// Not std::ceil: it was nxlock's only use of libm, and loading libm.so cost every
// invocation (BENCHMARKS.md, "Shared objects loaded at start").
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

// "lock 'KEY'", and with --slots the slot held: "lock 'KEY' slot 2".
std::string lock_words(const lock::Lockable& lock) {
  std::string words = "lock '" + util::escape(lock.key()) + "'";
  if (lock.slot() > 0) {
    words += " slot " + std::to_string(lock.slot());
  }
  return words;
}

// The lost lock in words, as it is found (even under -q: it stopped the user's job).
void say_lost(Context& ctx, const lock::Lockable& lock, const run::Loss& loss, run::OnLost action) {
  std::string why = loss.verdict ? verdict_reason(*loss.verdict) : "";
  if (!loss.detail.empty()) {
    why += why.empty() ? loss.detail : " (" + loss.detail + ")";
  }
  ctx.out.warn(lock_words(lock) + " lost: " + why);
  const std::string who = loss.by_watchdog ? "the watchdog stopped the job" : "stopping the job";
  switch (action) {
    case run::OnLost::term:
      if (loss.grace_cut_to) {
        ctx.out.warn(who + " (SIGTERM, SIGKILL after " + util::seconds_text(*loss.grace_cut_to) +
                     "): the grace period was cut short, the job must be gone before the lock "
                     "could expire");
      } else {
        ctx.out.warn(who + " (SIGTERM, SIGKILL after the grace period)");
      }
      break;
    case run::OnLost::kill:
      ctx.out.warn(who + " (SIGKILL)");
      break;
    case run::OnLost::ignore:
      ctx.out.warn("the job keeps running (--on-lost ignore)");
      break;
  }
}

// Counts `event` in --metrics-dir, if given. A directory that cannot be
// written costs the metrics, never the job: one line on stderr says so, once
// a run (`warned`: said already, by its start's write).
void count_in_metrics(Context& ctx, const RunLockedArgs& args, std::string_view key,
                      const run::MetricsEvent& event, bool& warned) {
  if (args.metrics_dir.empty()) {
    return;
  }
  try {
    run::record_metrics(args.metrics_dir, key, event);
  } catch (const util::Error& e) {
    if (std::exchange(warned, true)) {
      return;
    }
    ctx.out.warn("metrics not written: " + util::escape(e.subject()) + ": " + e.reason());
  }
}

// With --hold, the lock spans one tick of a fleet only if the jitter spreads
// the takers within it (man page, "A fleet of hosts"): said, not refused.
void warn_jitter_against_hold(Context& ctx, const RunLockedArgs& args) {
  if (args.hold > 0 && args.lock.jitter > 0 && args.lock.jitter >= args.hold) {
    ctx.out.warn("--jitter " + util::seconds_text(ceil_micros(args.lock.jitter)) +
                 " is not shorter than --hold " + util::seconds_text(ceil_micros(args.hold)) +
                 ": a host whose delay outlasts the hold may take the lock again for the same "
                 "tick");
  }
}

// The end ping, within --ping-timeout; --json says where it went (scheme and
// host alone) and whether the checker answered.
void ping_end(Context& ctx, run::Pinger& pinger, int status) {
  const bool answered = pinger.finish(status);
  ctx.out.field("ping", nlohmann::json{{"to", pinger.target().url.shown()}, {"answered", answered}});
}

}  // namespace

Runner run_locked_runner(std::shared_ptr<RunLockedArgs> args) {
  return [args](Context& ctx) {
    ctx.takes_locks = true;
    ctx.renews_while_alive = !args->no_renew;
    if (!args->shell_command.empty()) {
      // -c STRING before KEY, as flock's -c: a shell runs it (never otherwise).
      if (!ctx.child_command.empty()) {
        throw util::Error(util::ErrorKind::usage, "run-locked",
                          "-c STRING and a COMMAND after KEY: give one of them");
      }
      ctx.child_command = {"/bin/sh", "-c", args->shell_command};
    }
    const std::vector<std::string>& command = ctx.child_command;
    if (command.empty()) {
      throw util::Error(util::ErrorKind::usage, "run-locked",
                        "no COMMAND to run after KEY (or -c STRING for a shell command)");
    }
    const std::unique_ptr<run::Pinger> pinger = make_pinger(ctx, *args);

    // A lock that may be waited for: the watchdog is forked now, so that when the
    // lock comes, the job starts without a process start of ours first
    // (BENCHMARKS.md, "The watchdog forked before a wait, the job vforked"), and
    // before the store is opened, so that it holds none of its descriptors. -n
    // forks it only once the lock is taken.
    // If we die, the watchdog releases the lock once the job is gone, by a
    // connection of its own (its fork of us holds none that still work): the
    // hold as `unlock` names it, taken over with our take's token.
    run::JobWatchdog watchdog([&ctx, args](const std::string& printed,
                                           const run::TakenHold& take) {
      ctx.forget_backend();
      const auto clock = ctx.locks().clock(args->lock.clock == "local");
      const auto hold =
          ctx.locks().lock_for_value(*clock, ctx.key(args->key), args->lock.slots, printed);
      hold.lock->resume(hold.value, take.fence, take.ttl);
      if (take.hold_until > util::Micros(0)) {
        return hold.lock->release_after(hold.value, take.hold_until).verdict;
      }
      return hold.lock->release(hold.value);
    });
    if (!args->lock.nonblock) {
      sigset_t mask;
      sigprocmask(SIG_BLOCK, nullptr, &mask);  // as we were started: the job's mask
      watchdog.prepare(command, mask);
    }
    EventLog events(args->lock.syslog);
    bool metrics_warned = false;
    CliLock cli_lock(ctx, args->key, args->lock);
    warn_jitter_against_hold(ctx, *args);
    util::Micros wait_began = util::mono_now();
    // --replace: asks the holder to stop before the wait (and bounds it), and
    // takes the request away once the wait ends, before our job starts.
    std::optional<Replacer> replacer;
    if (args->replace) {
      replacer.emplace(ctx, cli_lock, *args);
      if (!replacer->ask()) {
        return replacer->exit_status();
      }
    }
    const bool acquired = cli_lock.acquire();
    if (replacer) {
      replacer->withdraw();
    }
    if (!acquired) {
      // Busy (or given up waiting), as opposed to interrupted while waiting.
      if (cli_lock.exit_status() == args->lock.conflict_exit) {
        events.busy(cli_lock.lock().key(), cli_lock.busy_holder());
        run::MetricsEvent busy;
        busy.busy = true;
        count_in_metrics(ctx, *args, cli_lock.lock().key(), busy, metrics_warned);
        if (pinger && args->ping_on_busy) {
          ping_end(ctx, *pinger, k_exit_ok);  // a per-host check: this host's tick is done
        }
      }
      return cli_lock.exit_status();
    }
    lock::Lockable& lock = cli_lock.lock();
    const util::Micros taken_at = util::mono_now();
    // The wait counts from the first try, after --jitter's delay (as -w does).
    wait_began += cli_lock.jitter();
    util::trace("lock '" + util::escape(lock.key()) + "' taken after " +
                util::seconds_text(taken_at - wait_began) + " of waiting");
    events.taken(lock.key(), lock.slot(), cli_lock.fence(), taken_at - wait_began, command.front());
    run::HeldLock held{
        *cli_lock.value(), cli_lock.valid_from() + util::Micros(args->lock.ttl * 1'000'000), {}};

    run::RunOptions options;
    options.command = command;
    options.ttl = args->lock.ttl;
    options.renew = !args->no_renew;
    options.on_lost = parse_on_lost(args->on_lost);
    options.kill_after = util::Micros(static_cast<std::int64_t>(args->kill_after * 1e6));
    if (args->max_runtime > 0) {
      options.max_runtime = ceil_micros(args->max_runtime);
    }
    options.inherit_credentials = args->inherit_credentials;
    options.hold = ceil_micros(args->hold);
    // On the clock that made the lock decision (Redis TIME unless --clock local),
    // read after the lock was taken: the hold counts from no earlier than that.
    options.acquired_at = cli_lock.clock().now();
    options.holder_command = ctx.redact(join(command));

    run::Reporter reporter;
    reporter.warn = [&ctx](std::string_view text) { ctx.out.warn(text); };
    reporter.lost = [&ctx, &lock, &events](const run::Loss& loss, run::OnLost action) {
      events.lost(lock.key(), loss.verdict ? verdict_token(*loss.verdict) : "unknown",
                  loss.detail);
      say_lost(ctx, lock, loss, action);
    };
    reporter.replaced = [&ctx, &lock, &events, &command](const std::string& by,
                                                        util::Micros grace) {
      events.replaced(lock.key(), command.front());
      ctx.out.warn(lock_words(lock) + ": replaced by " + by + " (run-locked --replace): " +
                   (grace > util::Micros(0)
                        ? "stopping the job (SIGTERM, SIGKILL after " + util::seconds_text(grace) +
                              ")"
                        : "stopping the job (SIGKILL)"));
    };
    reporter.timed_out = [&ctx, &lock, &options, &events, &command](util::Micros grace) {
      events.stopped(lock.key(), *options.max_runtime, command.front());
      ctx.out.warn(lock_words(lock) + ": the job ran past --max-runtime " +
                   util::seconds_text(*options.max_runtime) +
                   (grace > util::Micros(0)
                        ? ": stopping it (SIGTERM, SIGKILL after " + util::seconds_text(grace) + ")"
                        : ": stopping it (SIGKILL)"));
    };
    reporter.started = [&ctx, &args, &lock, &metrics_warned, &pinger] {
      if (pinger) {
        pinger->started();
      }
      if (!args->metrics_dir.empty()) {
        run::MetricsEvent started;
        started.starting = true;
        count_in_metrics(ctx, *args, lock.key(), started, metrics_warned);
      }
    };
    // Where a --replace would ask us to stop; none where the backend keeps no
    // requests (the holder record then says we cannot be asked).
    std::unique_ptr<lock::ReplaceRequests> requests;
    if (options.renew) {
      try {
        requests = ctx.locks().replace_requests(cli_lock.clock(), lock.key());
      } catch (const util::Error&) {
        // Not offered here (a quorum, etcd): this run cannot be asked.
      }
    }
    run::MetricsEvent event;
    event.waited = taken_at - wait_began;
    event.jitter = cli_lock.jitter();
    event.started = util::wall_now();
    const util::Micros started_mono = util::mono_now();
    const auto ran = [&] {
      try {
        return run::run_locked(lock, held, options, cli_lock.signals(), reporter, watchdog,
                               requests.get());
      } catch (const util::Error& e) {
        if (pinger) {
          ping_end(ctx, *pinger, exit_status_for(e.kind()));
        }
        throw;
      }
    }();
    event.ended = util::wall_now();
    event.duration = util::mono_now() - started_mono;
    util::trace("lock '" + util::escape(lock.key()) + "' held " +
                util::seconds_text(util::mono_now() - taken_at));
    const run::RunOutcome& outcome = ran.job;
    event.lost = outcome.lost;
    event.timed_out = outcome.timed_out;
    event.replaced = outcome.replaced;
    if (!ran.release_error.empty()) {
      ctx.out.note(lock_words(lock) + ": not released at exit: " + ran.release_error);
    } else if (ran.released && *ran.released != lock::Verdict::done) {
      ctx.out.note(lock_words(lock) + ": not released at exit: " + verdict_reason(*ran.released));
    }

    ctx.out.bytes_field("key", lock.key());
    ctx.out.field("acquired", true);
    if (lock.slot() > 0) {
      ctx.out.field("slot", lock.slot());
    }
    ctx.out.field("fence",
                  cli_lock.fence() > 0 ? nlohmann::json(cli_lock.fence()) : nlohmann::json());
    ctx.out.field("lost", outcome.lost);
    if (!ran.kept_value.empty()) {
      ctx.out.field("hold_until", std::stoll(ran.kept_value));
    }
    if (options.max_runtime) {
      ctx.out.field("timed_out", outcome.timed_out);
    }
    if (outcome.replaced) {
      ctx.out.field("replaced", true);
      ctx.out.field("reason", "replaced");
      ctx.out.field("replaced_by", outcome.replaced_by);
    }
    event.exit_status = outcome.status;
    switch (outcome.ending) {
      case run::RunOutcome::Ending::not_found:
        ctx.out.error(outcome.status, command.front(), "command not found");
        break;
      case run::RunOutcome::Ending::not_executable:
        ctx.out.error(outcome.status, command.front(), outcome.detail);
        break;
      case run::RunOutcome::Ending::exited:
      case run::RunOutcome::Ending::signaled:
        ctx.out.field("child_status", outcome.status);
        if ((outcome.lost && options.on_lost != run::OnLost::ignore) || outcome.replaced) {
          event.exit_status = k_exit_lock_lost;  // replaced: the lock went to the replacer
        } else if (outcome.timed_out) {
          event.exit_status = k_exit_timed_out;
        }
        break;
    }
    count_in_metrics(ctx, *args, lock.key(), event, metrics_warned);
    events.ended(lock.key(), event.exit_status, event.duration, command.front());
    if (pinger) {
      ping_end(ctx, *pinger, event.exit_status);  // after the release: never holds the lock up
    }
    return event.exit_status;
  };
}

}  // namespace nxlock::cli
