// A lock taken from the command line, as `lock` and `run-locked` take it:
// the clock and lock from where locks live (Context::locks()), the wait, and
// the busy report.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/command_args.hpp"
#include "cli/context.hpp"
#include "lock/lockable.hpp"
#include "run/signals.hpp"

namespace nxlock::cli {

// What a CliLock's acquire() came to: the value on success, else the exit status to use.
struct CliAcquire {
  std::optional<std::string> value;
  int exit_status = 0;
  util::Micros valid_from{0};  // acquired: see lock::Attempt::valid_from
  std::int64_t fence = 0;      // acquired: the fencing token
  std::optional<lock::Holder> holder;  // busy: who holds it, where one holder does (--syslog)
};

// The clock, the lock and the signal channel that ends a wait, kept together
// because the lock refers to the clock and the wait to the channel.
class CliLock {
 public:
  // The lock KEY of the kind the options ask (exclusive, --shared, --slots N).
  // Throws usage (64) for a kind the backend does not offer, or for --slots
  // with --shared.
  CliLock(Context& ctx, const std::string& key, const LockArgs& args);

  // Acquires, waiting as the options say. When busy or timed out, explains on
  // stderr until when and by whom the lock is held; false when busy, timed
  // out or interrupted (a signal: nothing taken), and then exit_status() says
  // what to exit with (-E's status, or 128+N).
  // With --jitter, first sleeps a random 0..SECONDS (jitter()); a signal
  // during it ends there, as one during the wait does.
  bool acquire();
  int exit_status() const { return m_acquired.exit_status; }
  // The --jitter delay slept before the first try (zero without --jitter).
  util::Micros jitter() const { return m_jitter; }
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
  lock::SlotLock* m_slots = nullptr;  // m_lock, when it is a slot lock (--slots)
  run::SignalChannel m_signals;
  CliAcquire m_acquired;
  util::Micros m_jitter{0};
};

}  // namespace nxlock::cli
