// lock, unlock, renew, status: the documented lock from a shell.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/acquire.hpp"
#include "cli/etcd_lock.hpp"
#include "cli/event_log.hpp"
#include "cli/exit_status.hpp"
#include "lock/lease_lock.hpp"
#include "util/escape.hpp"
#include "util/process.hpp"
#include "util/redact.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

using lock::Verdict;

// What a user can do about a lock whose holder is gone (Holder::gone).
std::string gone_advice(std::string_view key) {
  return "the lock stays held until it expires, or until `nxlock unlock --force " +
         util::escape(key) + "`";
}

namespace {

// While a waiter waits on a terminal, one line on stderr says who holds the
// lock, how long is left and how long we have waited; it is erased when the
// wait ends. Nothing is printed when stderr is not a terminal (cron, pipes).
class WaitStatusLine {
 public:
  WaitStatusLine(Context& ctx, lock::Lockable& lock)
      : m_lock(lock), m_enabled(!ctx.globals.quiet && isatty(STDERR_FILENO)) {}
  bool enabled() const { return m_enabled; }

  void show(const lock::WaitProgress& progress) {
    if (progress.held_until != m_held_until) {
      m_held_until = progress.held_until;
      m_holder = m_lock.holder_of(std::to_string(m_held_until));
    }
    const auto now = progress.now_seconds;  // the clock that found the lock held
    std::string line = "\rnxlock: waiting for '" + util::escape(m_lock.key()) + "'";
    if (m_holder) {
      line += ", held by " + holder_text(*m_holder);
    }
    line +=
        ", " + std::to_string(std::max<std::int64_t>(0, m_held_until - now)) +
        "s left, waited " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(progress.waited).count()) +
        "s\033[K";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    m_shown = true;
  }

  void erase() {
    if (m_shown) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
      m_shown = false;
    }
  }

 private:
  lock::Lockable& m_lock;
  bool m_enabled;
  bool m_shown = false;
  std::int64_t m_held_until = -1;
  std::optional<lock::Holder> m_holder;
};

struct VerdictWords {
  const char* token;   // --json
  const char* reason;  // stderr
};

VerdictWords words_for(Verdict verdict) {
  switch (verdict) {
    case Verdict::done:
      return {"done", "done"};
    case Verdict::expired:
      return {"expired", "expired"};
    case Verdict::taken_over:
      return {"taken_over", "taken over by another value"};
    case Verdict::absent:
      return {"absent", "no such lock"};
    case Verdict::held_by_other:
      return {"held_by_other", "held by another value"};
  }
  return {"unknown", "unknown"};
}

}  // namespace

// Records written by other clients (or older versions) may hold a password in
// their command: never show one.
nlohmann::json holder_json(const lock::Holder& holder) {
  nlohmann::json j = {{"host", holder.host},
                      {"pid", holder.pid},
                      {"command", util::redact_secrets(holder.command)},
                      {"acquired_at", holder.acquired_at}};
  if (holder.finished_at != 0) {
    j["finished_at"] = holder.finished_at;
  }
  if (holder.gone() || holder.releasing()) {
    j["running"] = false;
  }
  if (holder.releasing()) {
    j["releasing"] = true;  // its watchdog releases the lock once the job is gone
  }
  return j;
}

std::string holder_text(const lock::Holder& holder, bool say_gone) {
  std::string text = "pid " + std::to_string(holder.pid) + " on " + util::escape(holder.host);
  if (!holder.command.empty()) {
    text += " (" + util::escape(util::redact_secrets(holder.command)) + ")";
  }
  if (say_gone && holder.gone()) {
    text += ", no longer running";
  } else if (holder.releasing()) {
    text += ", no longer running; its watchdog releases the lock once the job has stopped";
  }
  return text;
}

const char* verdict_reason(Verdict verdict) {
  return words_for(verdict).reason;
}
const char* verdict_token(Verdict verdict) {
  return words_for(verdict).token;
}

std::string describe_distance(std::int64_t from, std::int64_t to) {
  const std::int64_t delta = to - from;
  return delta >= 0 ? "in " + std::to_string(delta) + "s" : std::to_string(-delta) + "s ago";
}

std::unique_ptr<lock::Clock> make_clock(Context& ctx, const std::string& clock_option) {
  // A quorum's servers' clocks cannot be combined into one value: its own decides.
  if (clock_option == "local" || ctx.quorum()) {
    return std::make_unique<lock::LocalClock>();
  }
  return std::make_unique<lock::StoreClock>(ctx.store());
}

std::unique_ptr<lock::Lockable> make_lock(Context& ctx, lock::Clock& clock, std::string key,
                                          int slots, bool shared) {
  if (auto etcd = make_etcd_lock(ctx, key, slots, shared)) {
    return etcd;
  }
  if (slots > 0 && shared) {
    throw util::Error(util::ErrorKind::usage, "--slots",
                      "cannot be used with --shared: a shared lock has no slots");
  }
  if (shared && ctx.quorum()) {
    throw util::Error(util::ErrorKind::usage, "--shared",
                      "not available with a quorum of servers; use one server");
  }
  if (slots > 0) {
    return make_semaphore(ctx, clock, std::move(key), slots);
  }
  if (ctx.quorum()) {
    return std::make_unique<lock::QuorumLock>(ctx.quorum_servers(), clock, std::move(key));
  }
  if (shared) {
    return std::make_unique<lock::LeaseLock>(ctx.store(), clock, std::move(key), 0);
  }
  return std::make_unique<lock::Lock>(ctx.store(), clock, std::move(key));
}

CliAcquire acquire_for_cli(Context& ctx, lock::Lockable& lock, const LockArgs& args,
                           run::SignalChannel& signals) {
  lock::WaitPolicy policy;
  if (args.nonblock) {
    policy.wait_for = util::Micros(0);
  } else if (args.wait >= 0) {
    policy.wait_for = util::Micros(static_cast<std::int64_t>(args.wait * 1e6));
  }
  policy.interrupt_fd = signals.fd();
  WaitStatusLine status_line(ctx, lock);
  if (status_line.enabled()) {
    policy.on_wait = [&status_line](const lock::WaitProgress& p) { status_line.show(p); };
  }

  const auto result = lock.acquire(args.ttl, policy);
  status_line.erase();
  switch (result.outcome) {
    case lock::AcquireResult::Outcome::acquired:
      return {result.value, k_exit_ok, result.valid_from, result.fence, {}};
    case lock::AcquireResult::Outcome::interrupted: {
      const int signo = signals.take().value_or(SIGTERM);
      ctx.out.note("lock '" + util::escape(lock.key()) + "': interrupted by " +
                   util::signal_name(signo) + " while waiting; nothing was taken");
      ctx.out.bytes_field("key", lock.key());
      ctx.out.field("acquired", false);
      ctx.out.field("interrupted_by", util::signal_name(signo));
      return {std::nullopt, 128 + signo, {}, 0, {}};
    }
    case lock::AcquireResult::Outcome::busy:
      break;
  }
  auto* const leased = dynamic_cast<lock::LeaseLock*>(&lock);
  if (leased != nullptr && leased->slots() > 0) {
    if (say_slots_busy(ctx, *leased, args)) {
      return {std::nullopt, args.conflict_exit, {}, 0, {}};
    }
    ctx.out.field("slots_held", 0);  // held by another kind, named below
  }
  const auto holder = lock.holder_of(result.held_value);
  // The clock that found the lock held (the server's, unless --clock local):
  // another clock may be off by any amount.
  const auto now = result.now_seconds;
  std::string message = "lock '" + util::escape(lock.key()) + "': busy, ";
  // Free this instant, but a queued waiter goes first: it is taking the lock,
  // or it died and its place lapses with its lease.
  const bool queued_ahead = result.held_until == 0;
  message += queued_ahead ? "free, but another waiter is first in line to take it"
                          : "held until " + util::format_local_time(result.held_until);
  // Leased holders say their kind; otherwise, a leased taker is told that
  // the holder is exclusive, the kind it waits for.
  const std::string by_leases = holder || queued_ahead ? "" : busy_shared_holders(ctx, lock);
  const bool exclusive = !queued_ahead && by_leases.empty();
  if (exclusive) {
    ctx.out.field("kind", "exclusive");
  }
  const bool say_exclusive = exclusive && leased != nullptr;
  if (holder) {
    const bool held_for_hold = holder->finished_at != 0;
    message += std::string(" by ") + (say_exclusive ? "an exclusive holder, " : "") +
               holder_text(*holder, !held_for_hold);
    if (held_for_hold) {
      message += ", whose job has finished: --hold keeps the lock until then";
    } else if (holder->gone()) {
      message += ": " + gone_advice(lock.key());
    }
  } else if (say_exclusive) {
    message += " by an exclusive holder";
  } else {
    message += by_leases;
  }
  ctx.out.note(message + (args.nonblock ? "" : " (gave up waiting)"));
  ctx.out.bytes_field("key", lock.key());
  ctx.out.field("acquired", false);
  if (queued_ahead) {
    ctx.out.field("queued_ahead", true);
  } else {
    ctx.out.field("held_until", result.held_until);
    ctx.out.field("seconds_left", result.held_until - now);
  }
  if (holder) {
    ctx.out.field("holder", holder_json(*holder));
  }
  return {std::nullopt, args.conflict_exit, {}, 0, holder};
}

Runner lock_runner(std::shared_ptr<LockCommandArgs> args) {
  return [args](Context& ctx) {
    ctx.takes_locks = true;
    EventLog events(args->lock.syslog);
    CliLock cli_lock(ctx, args->key, args->lock);
    const util::Micros wait_began = util::mono_now();
    if (!cli_lock.acquire()) {
      if (cli_lock.exit_status() == args->lock.conflict_exit) {
        events.busy(cli_lock.lock().key(), cli_lock.busy_holder());
      }
      return cli_lock.exit_status();
    }
    lock::Lockable& lock = cli_lock.lock();
    events.taken(lock.key(), lock.slot(), cli_lock.fence(), util::mono_now() - wait_began, "");
    const std::string& value = *cli_lock.value();
    // A signal from here on would leave the lock held by nobody, its value
    // unprinted: it stays pending until we have printed and exited.
    cli_lock.signals().keep_blocked();
    // The lock outlives this process: describe the shell or script that asked.
    const pid_t owner = getppid();
    lock.record_holder(lock::describe_holder(value, owner,
                                             ctx.redact(util::process_command_line(owner)),
                                             util::whole_seconds(cli_lock.clock().now())));
    // With --slots, what unlock and renew need is the slot and the value.
    const std::string printed = lock.slot() > 0 ? lock::slot_value(lock.slot(), value) : value;
    ctx.out.line(printed);
    ctx.out.bytes_field("key", lock.key());
    ctx.out.field("acquired", true);
    ctx.out.field("value", printed);
    if (lock.slot() > 0) {
      ctx.out.field("slot", lock.slot());
    }
    ctx.out.field("expires_at", std::stoll(value));
    ctx.out.field("fence",
                  cli_lock.fence() > 0 ? nlohmann::json(cli_lock.fence()) : nlohmann::json());
    return k_exit_ok;
  };
}

Runner unlock_runner(std::shared_ptr<UnlockArgs> args) {
  return [args](Context& ctx) {
    if (!args->force && args->value.empty()) {
      throw util::Error(util::ErrorKind::usage, "unlock",
                        "give the VALUE that `lock` printed, or --force");
    }
    auto clock = make_clock(ctx, args->clock);
    EventLog events(args->syslog);
    if (args->force) {
      // Every kind of hold goes: the exclusive holder's, or every leased one's.
      const auto lock_ptr = make_lock(ctx, *clock, ctx.key(args->key));
      lock::Lockable& lock = *lock_ptr;
      ctx.out.bytes_field("key", lock.key());
      const lock::Removal removal = lock.force_release();
      const bool deleted = removal.removed;
      if (removal.holder_problem) {
        ctx.out.warn("lock '" + util::escape(lock.key()) +
                     "': holder details not removed: " + *removal.holder_problem);
        ctx.out.field("holder_error", *removal.holder_problem);
      }
      ctx.out.field("released", deleted);
      if (deleted) {
        events.released(lock.key(), true);
      } else {
        events.not_released(lock.key(), verdict_token(Verdict::absent));
        ctx.out.note("lock '" + util::escape(lock.key()) +
                     "': not released: " + verdict_reason(Verdict::absent) +
                     (removal.held_under
                          ? " (lock '" + util::escape(*removal.held_under) +
                                "' under it holds, which is not this one's to release)"
                          : std::string()));
        ctx.out.field("reason", verdict_token(Verdict::absent));
        if (removal.held_under) {
          ctx.out.bytes_field("held_under", *removal.held_under);
        }
      }
      return deleted ? k_exit_ok : k_exit_no;
    }
    // The kind of hold the value names, by its form, as `lock` printed it.
    std::string value;
    const auto lock_ptr =
        lock_for_value(ctx, *clock, ctx.key(args->key), args->slots, args->value, value);
    lock::Lockable& lock = *lock_ptr;
    ctx.out.bytes_field("key", lock.key());
    const Verdict verdict = lock.release(value);
    ctx.out.field("released", verdict == Verdict::done);
    if (verdict != Verdict::done) {
      events.not_released(lock.key(), verdict_token(verdict));
      ctx.out.note("lock '" + util::escape(lock.key()) +
                   "': not released: " + verdict_reason(verdict));
      ctx.out.field("reason", verdict_token(verdict));
      return k_exit_no;
    }
    events.released(lock.key(), false);
    return k_exit_ok;
  };
}

Runner renew_runner(std::shared_ptr<RenewArgs> args) {
  return [args](Context& ctx) {
    ctx.takes_locks = true;
    auto clock = make_clock(ctx, args->clock);
    std::string value;
    const auto lock_ptr =
        lock_for_value(ctx, *clock, ctx.key(args->key), args->slots, args->value, value);
    lock::Lockable& lock = *lock_ptr;
    const lock::Renewed renewal = lock.renew(value, args->ttl);
    const Verdict verdict = renewal.verdict;
    const std::string& renewed = renewal.value;
    ctx.out.bytes_field("key", lock.key());
    ctx.out.field("renewed", verdict == Verdict::done);
    if (verdict != Verdict::done) {
      ctx.out.note("lock '" + util::escape(lock.key()) +
                   "': not renewed: " + verdict_reason(verdict));
      ctx.out.field("reason", verdict_token(verdict));
      return k_exit_no;
    }
    const std::string printed = lock.slot() > 0 ? lock::slot_value(lock.slot(), renewed) : renewed;
    ctx.out.line(printed);
    ctx.out.field("value", printed);
    if (lock.slot() > 0) {
      ctx.out.field("slot", lock.slot());
    }
    ctx.out.field("expires_at", std::stoll(renewed));
    return k_exit_ok;
  };
}

}  // namespace nxlock::cli
