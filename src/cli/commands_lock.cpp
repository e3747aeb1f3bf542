// lock, unlock, renew, status: the documented lock from a shell.
#include <unistd.h>

#include <memory>

#include "cli/acquire.hpp"
#include "cli/command_args.hpp"
#include "cli/event_log.hpp"
#include "cli/exit_status.hpp"
#include "cli/lock_words.hpp"
#include "lock/lease_lock.hpp"
#include "util/escape.hpp"
#include "util/process.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

using lock::Verdict;

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
    auto clock = ctx.locks().clock(args->clock == "local");
    EventLog events(args->syslog);
    if (args->force) {
      // Every kind of hold goes: the exclusive holder's, or every leased one's.
      const auto lock_ptr =
          ctx.locks().lock(*clock, ctx.key(args->key), lock::LockKind::exclusive);
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
    const auto hold =
        ctx.locks().lock_for_value(*clock, ctx.key(args->key), args->slots, args->value);
    lock::Lockable& lock = *hold.lock;
    const std::string& value = hold.value;
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
    auto clock = ctx.locks().clock(args->clock == "local");
    const auto hold =
        ctx.locks().lock_for_value(*clock, ctx.key(args->key), args->slots, args->value);
    lock::Lockable& lock = *hold.lock;
    const std::string& value = hold.value;
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
