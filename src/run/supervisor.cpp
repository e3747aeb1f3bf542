// Supervisor: fork/exec, signal forwarding, renewal and the lost-lock policy.
#include "run/supervisor.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "store/store.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/fd.hpp"
#include "util/random.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// While the backend fails, renewal retries after a jittered back-off that
// starts short (a restart or a dropped idle connection heals in milliseconds)
// and grows to a cap, until the lock could expire.
constexpr Micros k_backoff_first{50'000};
constexpr Micros k_backoff_cap{500'000};
// The last retry but one goes this long before the job must be stopped.
constexpr Micros k_last_chance{100'000};
// The release at the end retries for this long at most; past it, the lock is
// left to expire at its timestamp rather than keep the job's caller waiting.
constexpr Micros k_release_patience{10'000'000};

// Keeps the lock while the job runs: renews every ttl/3, and rides out a
// backend that fails for a while (a restart, a failover, an idle-client
// timeout) by retrying until the job must be stopped for the lock to be
// gone before it could expire (`lead` before that: the schedule's grace and
// kill margin). Every attempt's deadline is that moment, so no decision rests
// on a reply that came after it, and a lost lock is acted on within one
// renewal interval, whatever --timeout is.
class Renewal {
 public:
  Renewal(lock::Lockable& lock, HeldLock& held, std::int64_t ttl, Micros lead,
          const Reporter& reporter)
      : m_lock(lock),
        m_held(held),
        m_ttl(Micros(ttl * 1'000'000)),
        m_interval(std::max(m_ttl / 3, Micros(100'000))),
        m_lead(lead),
        m_next(util::mono_now() + m_interval),
        m_reporter(reporter) {}

  Micros next_at() const { return m_next; }

  // Renews if it is due. Returns why the lock is lost, if it is.
  std::optional<Loss> step() {
    const Micros sent = util::mono_now();
    if (sent < m_next) {
      return std::nullopt;
    }
    std::string written;
    const Micros act_by = m_held.valid_until - m_lead;
    try {
      lock::DeadlineScope deadline(m_lock, act_by);
      const lock::Verdict verdict =
          lock::on_value_or_earlier(m_held.value, m_held.maybe_ours, [&](const std::string& value) {
            return m_lock.renew(value, m_ttl.count() / 1'000'000, written);
          });
      if (verdict != lock::Verdict::done) {
        return Loss{verdict, {}};
      }
      // A failover can hand the lock to a replica that never had this renewal
      // (the replica that confirmed it re-syncs from the new master and drops
      // it): the value before it, under our token, is still ours.
      m_held.maybe_ours.assign(1, m_held.value);
      m_held.value = written;
      // The new value was computed after `sent`; a quorum's drift margin comes off.
      m_held.valid_until = sent + m_ttl - m_lock.validity_margin(m_ttl.count() / 1'000'000);
      m_next = util::mono_now() + m_interval;
      m_backoff = k_backoff_first;
      if (m_trouble_since) {
        m_reporter.warn("lock '" + util::escape(m_lock.key()) + "' renewed again after " +
                        util::seconds_text(util::mono_now() - *m_trouble_since) +
                        " of backend trouble");
        m_trouble_since.reset();
      }
      return std::nullopt;
    } catch (const util::Error& e) {
      if (!written.empty() && written != m_held.value) {
        m_held.maybe_ours.push_back(written);
      }
      const Micros now = util::mono_now();
      if (now >= act_by) {
        return Loss{std::nullopt, std::string("no renewal was confirmed before it could expire (") +
                                      e.what() + ")"};
      }
      if (!m_trouble_since) {
        m_trouble_since = now;
        m_reporter.warn(std::string("renewal failed, retrying while the lock is valid (") +
                        util::seconds_text(act_by - now) + " left): " + e.what());
      }
      // One attempt goes shortly before that moment, with time to reconnect
      // to a server that is back (the back-off alone may leave half a second
      // unused); the last goes at that moment itself, with no time left: it
      // fails at once, and the loss is acted on then, not a --timeout later.
      const Micros last_chance = act_by - k_last_chance;
      m_next = std::min(now + util::jittered(m_backoff), now < last_chance ? last_chance : act_by);
      m_backoff = std::min(m_backoff * 2, k_backoff_cap);
      return std::nullopt;
    }
  }

 private:
  lock::Lockable& m_lock;
  HeldLock& m_held;
  Micros m_ttl;
  Micros m_interval;
  Micros m_lead;  // how long before the lock's validity ends the job must be stopped
  Micros m_next;
  Micros m_backoff = k_backoff_first;
  std::optional<Micros> m_trouble_since;  // when the current run of failures began
  const Reporter& m_reporter;
};

int status_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return 128 + WTERMSIG(wait_status);
  }
  return WEXITSTATUS(wait_status);
}

// Hands the terminal's foreground to the child's group while it runs, so it can
// read the terminal and Ctrl-C reaches the whole job; gives it back afterwards.
class TerminalHandoff {
 public:
  TerminalHandoff() { m_active = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp(); }
  bool active() const { return m_active; }
  void give(pid_t group) const {
    if (m_active) {
      tcsetpgrp(STDIN_FILENO, group);
    }
  }
  ~TerminalHandoff() {
    if (m_active) {
      tcsetpgrp(STDIN_FILENO, getpgrp());  // SIGTTOU is blocked by SignalChannel
    }
  }

 private:
  bool m_active = false;
};

// The job's ending from its wait status; the watchdog is done with then.
// `stop_everything`: the lock was lost and the job is being stopped.
void settle(RunOutcome& outcome, int wait_status, bool stop_everything, JobWatchdog& watchdog) {
  if (stop_everything) {
    // The job is being stopped: nothing it started may go on running, even
    // what left its process group (setsid), which the group's signals missed.
    watchdog.kill_all();
  }
  watchdog.disarm();
  outcome.ending =
      WIFSIGNALED(wait_status) ? RunOutcome::Ending::signaled : RunOutcome::Ending::exited;
  outcome.status = status_of(wait_status);
}

}  // namespace

void collect_status(Supervised& supervised, JobWatchdog& watchdog) {
  if (supervised.status_pending) {
    settle(supervised.job, watchdog.wait_status(), false, watchdog);
    supervised.status_pending = false;
  }
}

Supervised supervise(lock::Lockable& lock, HeldLock& held, const RunOptions& options,
                     const std::vector<JobWatchdog::EnvSetting>& environment,
                     SignalChannel& signals, const Reporter& reporter, JobWatchdog& watchdog) {
  const StopSchedule schedule =
      stop_schedule(options.on_lost != OnLost::ignore, options.on_lost == OnLost::kill,
                    options.kill_after, options.ttl);
  // The job must be stopping by then, unless a renewal moves it on.
  const auto act_by = [&] { return held.valid_until - schedule.lead(); };
  if (util::mono_now() >= act_by()) {
    // The backend answered so late that the lock may have expired already.
    throw util::Error(util::ErrorKind::unavailable, "lock '" + util::escape(lock.key()) + "'",
                      "acquired too late to be sure it is still held; the job was not started");
  }
  Supervised supervised;
  RunOutcome& outcome = supervised.job;
  if (!watchdog.prepared()) {
    watchdog.prepare(options.command, signals.original_mask());
  }
  TerminalHandoff terminal;
  const auto started = watchdog.start(environment, terminal.active(), schedule, held.valid_until);
  if (started.exec_error != 0) {
    watchdog.disarm();
    const int error = started.exec_error;
    outcome.ending =
        error == ENOENT ? RunOutcome::Ending::not_found : RunOutcome::Ending::not_executable;
    outcome.status = error == ENOENT ? 127 : 126;
    outcome.detail = std::strerror(error);
    return supervised;
  }
  const pid_t child = started.pid;
  terminal.give(child);
  // Only now: the details are advisory, and the job need not wait for them.
  lock.record_holder(options.holder);

  Renewal renewal(lock, held, options.ttl, schedule.lead(), reporter);
  const auto signal_job = [&](int signo) {
    if (kill(-child, signo) != 0) {
      kill(child, signo);  // the group may be gone while the child lingers
    }
  };
  // The lost lock's policy, carried out by the watchdog, so that the SIGKILL
  // comes on time even if we are stopped in between. It comes before the lock
  // could expire, whatever --kill-after says: the grace is cut short to that.
  const auto lose = [&](Loss loss) {
    outcome.lost = true;
    const Micros now = util::mono_now();
    Micros kill_at = now;
    if (options.on_lost == OnLost::term) {
      kill_at = std::min(now + options.kill_after, schedule.kill_at(held.valid_until));
      if (kill_at < now + options.kill_after) {
        loss.grace_cut_to = std::max(kill_at - now, Micros(0));
      }
    }
    reporter.lost(loss, options.on_lost);
    switch (options.on_lost) {
      case OnLost::term:
        watchdog.stop(SIGTERM, kill_at);
        break;
      case OnLost::kill:
        watchdog.stop(SIGKILL, now);
        break;
      case OnLost::ignore:
        break;
    }
  };

  for (;;) {
    const Micros now = util::mono_now();
    Micros timeout = Micros::max();
    if (!outcome.lost) {
      // Not renewed, the lock is lost when it could expire: wake up then to act.
      timeout = (options.renew ? renewal.next_at() : act_by()) - now;
    }
    const int timeout_ms = timeout == Micros::max() ? -1 : util::poll_timeout_ms(timeout);
    // The job's end is seen on exit_fd() at once, before the watchdog has
    // reaped it and reported; the status follows (collect_status), after the
    // release: the next holder need not wait for our watchdog to be scheduled.
    // A lost lock is not released: its job's end waits for the report, which
    // decides what is left to stop.
    const int exit_fd = outcome.lost ? -1 : watchdog.exit_fd();
    pollfd fds[3] = {
        {signals.fd(), POLLIN, 0}, {watchdog.status_fd(), POLLIN, 0}, {exit_fd, POLLIN, 0}};
    if (poll(fds, 3, timeout_ms) < 0 && errno != EINTR) {
      throw util::Error(util::ErrorKind::internal, "poll", std::strerror(errno));
    }

    while (const auto signo = signals.take()) {
      signal_job(*signo);
    }
    const auto wait_status = watchdog.take_status();
    if (watchdog.stopped_by_itself() && !outcome.lost) {
      // We did not act in time (stopped, hung, or just late): the watchdog
      // began the stop.
      outcome.lost = true;
      Loss loss{std::nullopt, "no renewal was confirmed in time, and the watchdog stopped the job"};
      loss.by_watchdog = true;
      if (options.on_lost == OnLost::term && options.kill_after > schedule.grace) {
        loss.grace_cut_to = schedule.grace;
      }
      reporter.lost(loss, options.on_lost);
    }
    if (wait_status) {
      settle(outcome, *wait_status, outcome.lost && options.on_lost != OnLost::ignore, watchdog);
      return supervised;
    }
    if (fds[2].revents != 0 && !outcome.lost) {
      outcome.ending = RunOutcome::Ending::exited;  // it ran; collect_status says how it ended
      supervised.status_pending = true;
      return supervised;
    }

    if (!options.renew && !outcome.lost && util::mono_now() >= act_by()) {
      if (options.on_lost == OnLost::ignore) {
        lose(Loss{lock::Verdict::expired, "--no-renew"});
      } else {
        lose(Loss{std::nullopt, "not renewed (--no-renew), it would expire in " +
                                    util::seconds_text(held.valid_until - util::mono_now()) +
                                    " with the job still running"});
      }
    }
    if (options.renew && !outcome.lost) {
      const Micros before = held.valid_until;
      if (const auto lost = renewal.step()) {
        lose(*lost);
      } else if (held.valid_until != before) {
        watchdog.extend(held.valid_until);
      }
    }
  }
}

lock::Verdict release_held(lock::Lockable& lock, HeldLock& held, const ReleaseStep& release_one) {
  // No deadline cap here: the compare-and-delete is decided by the server on
  // the value alone, so a late answer is still a true one. Retries stop when
  // the lock could expire anyway, or after k_release_patience.
  const Micros give_up = std::min(held.valid_until, util::mono_now() + k_release_patience);
  Micros backoff = k_backoff_first;
  bool unanswered = false;  // an earlier attempt's reply was lost: it may have deleted the key
  for (;;) {
    try {
      const lock::Verdict verdict =
          lock::on_value_or_earlier(held.value, held.maybe_ours, [&](const std::string& value) {
            return release_one ? release_one(value) : lock.release(value);
          });
      return verdict == lock::Verdict::absent && unanswered ? lock::Verdict::done : verdict;
    } catch (const util::Error&) {
      unanswered = true;
      const Micros now = util::mono_now();
      if (now >= give_up) {
        throw;
      }
      const Micros pause = std::min(util::jittered(backoff), give_up - now);
      backoff = std::min(backoff * 2, k_backoff_cap);
      // A plain sleep: the job is over, and the signals we forward are blocked.
      timespec left{static_cast<time_t>(pause.count() / 1'000'000),
                    static_cast<long>(pause.count() % 1'000'000 * 1000)};
      while (nanosleep(&left, &left) != 0 && errno == EINTR) {
      }
    }
  }
}

}  // namespace nxlock::run
