// Supervising run-locked's job: signals passed on, the lock renewed, its deadline
// told to the watchdog, and the lost-lock policy.
#include <signal.h>

#include <algorithm>
#include <string>
#include <utility>

#include "run/renewal.hpp"
#include "run/stages.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::run {

using util::Micros;

// How long a job runs before a lock with news (lock::HeldNews) is told it
// settled (job_settled) and its news of a loss is watched (loss_fd): on etcd the holder's
// details and the watch are requests of their own, which a job that ends at
// once never needs. The watch starts from the acquisition's revision, so a
// loss in this moment is still reported, only this much later.
constexpr Micros k_job_settles_after{50'000};

Supervised supervise(LockedRun& run, const Job& job) {
  const RunOptions& options = run.options;
  const StopSchedule& schedule = run.schedule;
  JobWatchdog& watchdog = run.watchdog;
  Supervised supervised;
  RunOutcome& outcome = supervised.job;

  // The watchdog learns a renewal's value before it is written: if we die
  // before its reply, the lock may hold it, and the watchdog releases that too.
  Renewal renewal(run.lock, run.held, options.ttl, schedule.lead(), run.reporter,
                  [&](const std::string& planned) {
                    watchdog.update(run.held.valid_until,
                                    release_values(run.lock, run.held, &planned));
                  });
  const auto signal_job = [&](int signo) {
    if (kill(-job.pid, signo) != 0) {
      kill(job.pid, signo);  // the group may be gone while the child lingers
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
      kill_at = std::min(now + options.kill_after, schedule.kill_at(run.held.valid_until));
      if (kill_at < now + options.kill_after) {
        loss.grace_cut_to = std::max(kill_at - now, Micros(0));
      }
    }
    run.reporter.lost(loss, options.on_lost);
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

  // --max-runtime counts from here, the job just started. Its stop is the
  // lost lock's, by the watchdog (the SIGKILL on time even if we are stopped),
  // but the lock is still ours: renewed through the grace, released after.
  const Micros time_up =
      options.max_runtime ? util::mono_now() + *options.max_runtime : Micros::max();
  const auto stopping = [&] {
    return outcome.timed_out || outcome.replaced ||
           (outcome.lost && options.on_lost != OnLost::ignore);
  };
  // A --replace request (docs/DESIGN.md, "Replacing a run"): the job is
  // stopped as at --max-runtime (--on-lost kill: at once), the lock renewed
  // until it is gone, then released for the replacer.
  const auto replace = [&](const lock::ReplaceRequest& request) {
    outcome.replaced = true;
    outcome.replaced_by = request.who();
    const Micros now = util::mono_now();
    const Micros kill_at =
        options.on_lost == OnLost::kill
            ? now
            : std::min(now + options.kill_after, schedule.kill_at(run.held.valid_until));
    if (run.reporter.replaced) {
      run.reporter.replaced(outcome.replaced_by, std::max(kill_at - now, Micros(0)));
    }
    watchdog.stop(kill_at > now ? SIGTERM : SIGKILL, kill_at);
  };
  // The request is looked for at each renewal, and when the watch on it wakes
  // (made once the job has settled: a job that ends at once never pays for it).
  std::unique_ptr<store::Watcher> request_watch;
  bool request_watched = !run.askable();
  const auto look_for_request = [&] {
    if (stopping() || outcome.lost) {
      return;
    }
    try {
      if (const auto request = run.requests->pending()) {
        replace(*request);
      }
    } catch (const util::Error& e) {
      util::trace(std::string("--replace: request not read: ") + e.what());
    }
  };

  lock::HeldNews* const news = run.lock.held_news();
  const Micros settled_at = util::mono_now() + k_job_settles_after;
  bool settled = news == nullptr;  // a lock without news has nothing to settle
  for (;;) {
    // Not renewed, the lock is lost when it could expire: wake up then to act.
    // A lost lock has nothing left to wake up for but the job's end.
    Micros wake_at = Micros::max();
    if (!outcome.lost) {
      wake_at = options.renew ? renewal.next_at() : run.act_by();
    }
    if (!stopping()) {
      wake_at = std::min(wake_at, time_up);
    }
    // The job's end is seen on exit_fd() at once, before the watchdog has
    // reaped it and reported; the status follows (collect_exit_status), after
    // the release: the next holder need not wait for our watchdog to be
    // scheduled. A lost lock is not released, nor one whose job is being
    // stopped: its job's end waits for the report, which decides what is left
    // to stop.
    const int exit_fd =
        outcome.lost || outcome.timed_out || outcome.replaced ? -1 : watchdog.exit_fd();
    if (!settled && !outcome.lost && util::mono_now() >= settled_at) {
      settled = true;
      news->job_settled();
    }
    int loss_fd = -1;
    if (!settled && !outcome.lost) {
      wake_at = std::min(wake_at, settled_at);
    } else if (news != nullptr && options.renew && !outcome.lost) {
      loss_fd = news->loss_fd();
    }
    if (!request_watched && !stopping()) {
      if (util::mono_now() >= settled_at) {
        request_watched = true;
        try {
          request_watch = run.requests->watch();
        } catch (const util::Error& e) {
          util::trace(std::string("--replace: no watch on the request: ") + e.what());
        }
        look_for_request();  // one posted before the watch was armed
      } else {
        wake_at = std::min(wake_at, settled_at);
      }
    }
    const int request_fd = request_watch && !stopping() ? request_watch->fd() : -1;
    pollfd fds[5] = {{run.signals.fd(), POLLIN, 0},
                     {watchdog.status_fd(), POLLIN, 0},
                     {exit_fd, POLLIN, 0},
                     {loss_fd, POLLIN, 0},
                     {request_fd, POLLIN, 0}};
    // Signals to pass on come as data on signals.fd(), not as EINTR.
    util::poll_until(fds, 5, wake_at);
    if (fds[3].revents != 0 && news->lost()) {
      renewal.hurry();  // the lock may be gone: its renewal's verdict says
    }
    if (fds[4].revents != 0 &&
        request_watch->wait(Micros(0), -1) == store::WaitResult::changed) {
      look_for_request();
    }

    while (const auto signo = run.signals.take()) {
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
      run.reporter.lost(loss, options.on_lost);
    }
    if (wait_status) {
      if (stopping()) {
        // The job is being stopped: nothing it started may go on running, even
        // what left its process group (setsid), which the group's signals missed.
        watchdog.kill_all();
      }
      watchdog.disarm();
      outcome = with_exit_status(std::move(outcome), *wait_status);
      return supervised;
    }
    if (fds[2].revents != 0 && !outcome.lost && !outcome.timed_out && !outcome.replaced) {
      outcome.ending = RunOutcome::Ending::exited;  // it ran; collect_exit_status says how it ended
      supervised.status_pending = true;
      return supervised;
    }

    if (!stopping() && util::mono_now() >= time_up) {
      // SIGKILL after the grace, or before the lock could expire, if sooner
      // (as the watchdog would cut it anyway): renewal may fail meanwhile.
      outcome.timed_out = true;
      const Micros now = util::mono_now();
      const Micros kill_at =
          std::min(now + options.kill_after, schedule.kill_at(run.held.valid_until));
      if (run.reporter.timed_out) {
        run.reporter.timed_out(std::max(kill_at - now, Micros(0)));
      }
      watchdog.stop(kill_at > now ? SIGTERM : SIGKILL, kill_at);
    }
    if (!options.renew && !outcome.lost && util::mono_now() >= run.act_by()) {
      if (options.on_lost == OnLost::ignore) {
        lose(Loss{lock::Verdict::expired, "--no-renew"});
      } else {
        lose(Loss{std::nullopt, "not renewed (--no-renew), it would expire in " +
                                    util::seconds_text(run.held.valid_until - util::mono_now()) +
                                    " with the job still running"});
      }
    }
    if (options.renew && !outcome.lost) {
      const Micros before = run.held.valid_until;
      if (const auto lost = renewal.step()) {
        lose(*lost);
      } else if (run.held.valid_until != before) {
        watchdog.update(run.held.valid_until, release_values(run.lock, run.held));
        if (run.askable()) {
          look_for_request();  // at each renewal, whether a watch woke us or not
        }
      }
    }
  }
}

}  // namespace nxlock::run
