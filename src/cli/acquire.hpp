// Acquiring a lock from the command line: clock choice, waiting, the busy report.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/command_args.hpp"
#include "lock/lock.hpp"
#include "lock/lease_lock.hpp"
#include "run/signals.hpp"

namespace nxlock::cli {

// The clock lock decisions use: the server's for Redis unless --clock local.
std::unique_ptr<lock::Clock> make_clock(Context& ctx, const std::string& clock_option);

// The lock KEY on the backend the options name: one server, or a quorum of
// several; with `slots` above zero, a counting semaphore of that many slots;
// with `shared`, a shared holder of it. A quorum refuses both, and --slots
// with --shared, with a usage error (64).
std::unique_ptr<lock::Lockable> make_lock(Context& ctx, lock::Clock& clock, std::string key,
                                          int slots = 0, bool shared = false);

// The semaphore KEY of `slots` slots (--slots) on one server. Throws usage
// (64) with a quorum: it keeps no waiters' queue, so the slots could not go
// to waiters in arrival order.
std::unique_ptr<lock::LeaseLock> make_semaphore(Context& ctx, lock::Clock& clock, std::string key,
                                                int slots);

// The hold of KEY that `unlock` and `renew` act on: the kind `value` names by
// its form, as `lock` printed it (SLOT:EXPIRY, EXPIRY:ID, EXPIRY), with no
// --slots or --shared needed; `slots` (--slots N, or 0) only bounds a slot's
// number. `lock_value` receives the value as the lock takes it (a slot's
// EXPIRY). Throws usage (64) for a value of no form, or against --slots.
std::unique_ptr<lock::Lockable> lock_for_value(Context& ctx, lock::Clock& clock, std::string key,
                                               int slots, const std::string& value,
                                               std::string& lock_value);

// The busy report of a semaphore (acquire_for_cli): every slot held, and by
// whom, briefly; or a free slot that a waiter ahead is taking. False, having
// said nothing, when the key is held by another kind (an exclusive holder, or
// shared ones): the lock's own busy report names them.
bool say_slots_busy(Context& ctx, lock::LeaseLock& semaphore, const LockArgs& args);

// `status --slots N KEY`: every slot. Exit 0 when every slot is held (the
// next taker would wait), 1 when at least one is free.
int slots_status(Context& ctx, lock::LeaseLock& semaphore);

// What a user can do about a lock whose holder is gone.
std::string gone_advice(std::string_view key);

// The outcome of acquire_for_cli: the value on success, else the exit status to use.
struct CliAcquire {
  std::optional<std::string> value;
  int exit_status = 0;
  util::Micros valid_from{0};  // acquired: see lock::Attempt::valid_from
  std::int64_t fence = 0;      // acquired: the fencing token
  std::optional<lock::Holder> holder;  // busy: who holds it, where one holder does (--syslog)
};

// Acquires as `lock` and `run-locked` do. When busy or timed out, explains on
// stderr until when and by whom the lock is held, and gives -E's status (75).
// A signal while waiting ends the wait: no lock is taken, status 128+N.
CliAcquire acquire_for_cli(Context& ctx, lock::Lockable& lock, const LockArgs& args,
                           run::SignalChannel& signals);

// A lock taken from the command line, as `lock` and `run-locked` do: the
// clock, the lock and the signal channel that ends a wait, kept together
// because the lock refers to the clock and the wait to the channel.
class CliLock {
 public:
  CliLock(Context& ctx, const std::string& key, const LockArgs& args)
      : m_ctx(ctx),
        m_args(args),
        m_clock(make_clock(ctx, args.clock)),
        m_lock(make_lock(ctx, *m_clock, ctx.key(key), args.slots, args.shared)) {}

  // Acquires (acquire_for_cli); false when busy, timed out or interrupted,
  // and then exit_status() says what to exit with.
  bool acquire() {
    m_acquired = acquire_for_cli(m_ctx, *m_lock, m_args, m_signals);
    return m_acquired.value.has_value();
  }
  int exit_status() const { return m_acquired.exit_status; }
  const std::optional<std::string>& value() const { return m_acquired.value; }
  util::Micros valid_from() const { return m_acquired.valid_from; }
  std::int64_t fence() const { return m_acquired.fence; }
  const std::optional<lock::Holder>& busy_holder() const { return m_acquired.holder; }

  lock::Clock& clock() { return *m_clock; }
  lock::Lockable& lock() { return *m_lock; }
  run::SignalChannel& signals() { return m_signals; }

 private:
  Context& m_ctx;
  const LockArgs& m_args;
  std::unique_ptr<lock::Clock> m_clock;
  std::unique_ptr<lock::Lockable> m_lock;
  run::SignalChannel m_signals;
  CliAcquire m_acquired;
};

// A verdict in words, for stderr (unlock, renew, run-locked), and as a stable
// token for --json (scripts match on it).
const char* verdict_reason(lock::Verdict verdict);
const char* verdict_token(lock::Verdict verdict);

// A holder record for --json and for a message (its command redacted, as
// records of other clients may hold a password; "no longer running" when gone).
nlohmann::json holder_json(const lock::Holder& holder);
// `say_gone`: add ", no longer running" when the holder is gone (not where the
// caller says why: a --hold whose job finished).
std::string holder_text(const lock::Holder& holder, bool say_gone = true);

// A lock held by --shared (or --slots) holders has no holder of its own:
// " by N shared holders: pid … on HOST (…), …" names them (the first few) for
// the busy message, and --json's "shared" lists them all, and "kind" says
// which kind they are. Empty when no leased holder holds it. Throws as
// Lockable::status() does.
std::string busy_shared_holders(Context& ctx, lock::Lockable& lock);

// "in 42s" / "3s ago" style distance between two Unix times.
std::string describe_distance(std::int64_t from, std::int64_t to);

}  // namespace nxlock::cli
