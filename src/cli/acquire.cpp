// Acquiring a lock from the command line: waiting, the wait's status line, the busy report.
#include "cli/acquire.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli/exit_status.hpp"
#include "cli/lock_words.hpp"
#include "cli/slots_report.hpp"
#include "lock/lease_lock.hpp"
#include "util/escape.hpp"
#include "util/poll.hpp"
#include "util/process.hpp"
#include "util/random.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

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

// Acquires as `lock` and `run-locked` do. When busy or timed out, explains on
// stderr until when and by whom the lock is held, and gives -E's status (75).
// A signal while waiting ends the wait: no lock is taken, status 128+N.
// `slots`: the lock, when it is a slot lock (--slots).
CliAcquire acquire_for_cli(Context& ctx, lock::Lockable& lock, lock::SlotLock* slots,
                           const LockArgs& args, run::SignalChannel& signals) {
  lock::WaitPolicy policy;
  if (args.nonblock) {
    policy.wait_for = util::Micros(0);
  } else if (args.wait >= 0) {
    policy.wait_for = util::Micros(static_cast<std::int64_t>(args.wait * 1e6));
  }
  policy.interrupt_fd = signals.fd();
  policy.max_waiters = args.max_waiters;
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
    case lock::AcquireResult::Outcome::crowded: {
      const auto ahead = result.waiters_ahead;
      ctx.out.note("lock '" + util::escape(lock.key()) + "': not waiting: " +
                   std::to_string(ahead) + (ahead == 1 ? " run already waits" : " runs already wait") +
                   " (--max-waiters " + std::to_string(args.max_waiters) + ")");
      ctx.out.bytes_field("key", lock.key());
      ctx.out.field("acquired", false);
      ctx.out.field("waiters_ahead", ahead);
      return {std::nullopt, args.conflict_exit, {}, 0, {}};
    }
    case lock::AcquireResult::Outcome::busy:
      break;
  }
  // A leased taker (--shared, --slots) is told which kind holds the lock.
  const bool leased = args.shared || slots != nullptr;
  if (slots != nullptr) {
    if (say_slots_busy(ctx, *slots, args)) {
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
  const bool say_exclusive = exclusive && leased;
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

}  // namespace

CliLock::CliLock(Context& ctx, const std::string& key, const LockArgs& args)
    : m_ctx(ctx), m_args(args), m_clock(ctx.locks().clock(args.clock == "local")) {
  if (args.slots > 0 && args.shared) {
    throw util::Error(util::ErrorKind::usage, "--slots",
                      "cannot be used with --shared: a shared lock has no slots");
  }
  if (args.slots > 0) {
    auto slots = ctx.locks().slots(*m_clock, ctx.key(key), args.slots);
    m_slots = slots.get();
    m_lock = std::move(slots);
  } else {
    m_lock = ctx.locks().lock(*m_clock, ctx.key(key),
                              args.shared ? lock::LockKind::shared : lock::LockKind::exclusive);
  }
  // -n never joins the line: --max-waiters has nothing to count then.
  if (args.max_waiters > 0 && !args.nonblock) {
    if (const std::string why = m_lock->waiters_uncounted(); !why.empty()) {
      throw util::Error(util::ErrorKind::usage, "--max-waiters", "not available " + why);
    }
  }
}

bool CliLock::acquire() {
  if (m_args.jitter > 0) {
    // Before the first try, and outside the wait: -w counts from that try.
    const auto most = util::Micros(static_cast<std::int64_t>(m_args.jitter * 1e6));
    m_jitter = util::random_between(util::Micros(0), most);
    const util::Micros began = util::mono_now();
    const bool signalled = util::readable_before(m_signals.fd(), began + m_jitter);
    // The delay drawn, in seconds (microseconds' precision).
    m_ctx.out.field("jitter_seconds", static_cast<double>(m_jitter.count()) / 1e6);
    if (signalled) {
      m_jitter = util::mono_now() - began;  // what was slept of it
      const int signo = m_signals.take().value_or(SIGTERM);
      m_ctx.out.note("lock '" + util::escape(m_lock->key()) + "': interrupted by " +
                     util::signal_name(signo) + " during --jitter; nothing was taken");
      m_ctx.out.bytes_field("key", m_lock->key());
      m_ctx.out.field("acquired", false);
      m_ctx.out.field("interrupted_by", util::signal_name(signo));
      m_acquired = {std::nullopt, 128 + signo, {}, 0, {}};
      return false;
    }
  }
  m_acquired = acquire_for_cli(m_ctx, *m_lock, m_slots, m_args, m_signals);
  return m_acquired.value.has_value();
}

}  // namespace nxlock::cli
