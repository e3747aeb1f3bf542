// QuorumLock: the documented steps on every server at once, held by a majority.
#include "lock/quorum.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "lock/keys.hpp"
#include "lock/pacing.hpp"
#include "util/fd.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::Error;
using util::ErrorKind;
using util::Micros;

// Two clients that split the servers between them both undo and try again; a
// random pause first lets one of them get there before the other.
constexpr Micros k_split_pause_min{5'000};
constexpr Micros k_split_pause_max{60'000};
// A split is no holder: even -n tries again this many times.
constexpr int k_split_retries = 3;
// Undoing a failed round waits this long at most for each server.
constexpr Micros k_undo_patience{500'000};
// A key deleted between SETNX and GET is tried again at once, this often per round.
constexpr int k_tries_per_round = 3;
// A server that still owes this many replies is not asked again (see ask()).
constexpr std::size_t k_max_backlog = 2;
// Once a step is decided, the servers yet to reply get this long more.
constexpr Micros k_straggler_grace{50'000};
// status shows every server's state: a slow one (a TLS handshake on a loaded
// host) gets longer to be shown as it is.
constexpr Micros k_status_grace{1'000'000};
// At the end, queued jobs (the holder records) get this long to finish.
constexpr Micros k_exit_patience{500'000};

// True if `fd` (ignored if negative) becomes readable within `timeout`.
bool wait_readable(int fd, Micros timeout) {
  pollfd pfd{fd, POLLIN, 0};
  const Micros until = util::mono_now() + timeout;
  for (;;) {
    const int ready = poll(&pfd, 1, util::poll_timeout_ms(until - util::mono_now()));
    if (ready > 0) {
      return true;
    }
    if (ready == 0 || errno != EINTR) {
      return false;
    }
  }
}

// Waits on every armed watcher at once (a thread each, all stopped through one
// eventfd when the first sees a change), on `interrupt_fd` and on `timeout`.
// A watcher that fails is dropped; the caller arms it again later.
store::WaitResult wait_any(std::vector<std::shared_ptr<store::Watcher>>& watchers, Micros timeout,
                           int interrupt_fd) {
  std::vector<std::size_t> armed;
  for (std::size_t i = 0; i < watchers.size(); ++i) {
    if (watchers[i]) {
      armed.push_back(i);
    }
  }
  if (armed.empty()) {
    return wait_readable(interrupt_fd, timeout) ? store::WaitResult::interrupted
                                                : store::WaitResult::timed_out;
  }
  util::UniqueFd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  util::UniqueFd changed(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop || !changed) {
    throw Error(ErrorKind::internal, "eventfd", std::strerror(errno));
  }
  const auto watch_one = [&](std::size_t i) {
    try {
      if (watchers[i]->wait(timeout, stop.get()) == store::WaitResult::changed) {
        const std::uint64_t one = 1;
        (void)!write(changed.get(), &one, sizeof one);
      }
    } catch (const std::exception& e) {
      util::trace(std::string("quorum: watch dropped: ") + e.what());
      watchers[i].reset();
    }
  };
  std::vector<std::thread> threads;
  std::vector<std::size_t> inline_ones;
  for (const std::size_t i : armed) {
    try {
      threads.emplace_back(watch_one, i);
    } catch (const std::system_error&) {
      inline_ones.push_back(i);  // no thread to be had: a poll tick decides for this one
    }
  }
  pollfd fds[2] = {{changed.get(), POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
  const Micros until = util::mono_now() + timeout;
  while (poll(fds, 2, util::poll_timeout_ms(until - util::mono_now())) < 0 && errno == EINTR) {
  }
  const std::uint64_t one = 1;
  (void)!write(stop.get(), &one, sizeof one);
  for (auto& thread : threads) {
    thread.join();
  }
  if ((fds[1].revents & POLLIN) != 0) {
    return store::WaitResult::interrupted;
  }
  return wait_readable(changed.get(), Micros(0)) ? store::WaitResult::changed
                                                 : store::WaitResult::timed_out;
}

std::string millis_text(Micros duration) {
  return std::to_string(duration.count() / 1000) + "." +
         std::to_string(duration.count() % 1000 / 100) + " ms";
}

}  // namespace

std::size_t majority_of(std::size_t servers) {
  return servers / 2 + 1;
}

Micros drift_margin(std::int64_t ttl) {
  return Micros(2'000) + Micros(ttl * 10'000);
}

Micros validity_end(Micros started, std::int64_t ttl) {
  return started + Micros(ttl * 1'000'000) - drift_margin(ttl);
}

bool quorum_holds(std::size_t acquired, std::size_t servers, Micros started, Micros ended,
                  std::int64_t ttl) {
  return acquired >= majority_of(servers) && ended < validity_end(started, ttl);
}

namespace detail {

// A lock's clock frozen at one reading, set by each job from its step's reading:
// every server is given the same value and judged at the same instant, and a
// job that runs late still uses its own step's reading.
class FrozenClock final : public Clock {
 public:
  void set(Micros reading) { m_reading = reading; }
  Micros now() override { return m_reading; }

 private:
  Micros m_reading{0};
};

// One server of a quorum: its connection and Lock, used only by its worker
// thread, one job after another in the order they were queued (so a late job
// on a server that was stopped still comes before the next step's there). The
// worker and every queued job share it, so that a job a stopped server holds up
// can outlive the QuorumLock: at exit it is left to the process's end.
struct QuorumChannel {
  QuorumChannel(QuorumServer server, std::string lock_key)
      : spec(std::move(server)), key(std::move(lock_key)) {}

  // The server's lock, connecting first if it is not yet (throws util::Error).
  // Worker only.
  Lock& open() {
    if (!lock) {
      store = spec.open();
      store->set_deadline(deadline);
      lock = std::make_unique<Lock>(*store, clock, key);
    }
    return *lock;
  }

  const QuorumServer spec;
  const std::string key;
  // Worker only:
  FrozenClock clock;
  std::optional<Micros> deadline;
  std::unique_ptr<store::Store> store;  // open once it answered a connect
  std::unique_ptr<Lock> lock;
  // Shared, under `mutex`:
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable idle;
  std::deque<std::function<void(QuorumChannel&)>> jobs;
  std::size_t backlog = 0;  // jobs queued or running
  bool stop = false;
  std::thread worker;  // not started: jobs run on the caller's thread
};

}  // namespace detail

namespace {

using detail::QuorumChannel;

void serve(const std::shared_ptr<QuorumChannel>& channel) {
  std::unique_lock<std::mutex> lock(channel->mutex);
  for (;;) {
    channel->wake.wait(lock, [&] { return channel->stop || !channel->jobs.empty(); });
    if (channel->stop) {
      return;  // queued jobs are dropped: the lock that queued them is gone
    }
    auto job = std::move(channel->jobs.front());
    channel->jobs.pop_front();
    lock.unlock();
    job(*channel);
    lock.lock();
    --channel->backlog;
    channel->idle.notify_all();
  }
}

// Queues `job` for the channel's worker, or runs it here if it has none.
// False (and nothing queued) if the server still owes two earlier replies.
bool post(QuorumChannel& channel, std::function<void(QuorumChannel&)> job) {
  if (!channel.worker.joinable()) {
    job(channel);
    return true;
  }
  {
    std::lock_guard<std::mutex> guard(channel.mutex);
    if (channel.backlog >= k_max_backlog) {
      return false;
    }
    channel.jobs.push_back(std::move(job));
    ++channel.backlog;
  }
  channel.wake.notify_one();
  return true;
}

}  // namespace

template <typename T>
struct QuorumLock::Replies {
  std::vector<std::optional<T>> values;            // the servers that answered
  std::vector<std::optional<util::Error>> errors;  // those that failed, or gave no reply in time
  std::size_t pending = 0;                         // involved servers yet to reply
  std::size_t answered = 0;                        // values
  std::size_t failed = 0;                          // errors
};

template <typename T>
QuorumLock::Replies<T> QuorumLock::ask(std::function<T(QuorumChannel&)> step,
                                       const std::function<Decision(const Replies<T>&)>& enough,
                                       std::optional<Micros> deadline,
                                       const std::vector<bool>& involved,
                                       std::optional<Micros> wait_until,
                                       std::optional<Micros> grace) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable replied;
    Replies<T> replies;
    std::vector<bool> waiting;
  };
  const std::size_t n = m_channels.size();
  auto shared = std::make_shared<Shared>();
  shared->replies.values.assign(n, std::nullopt);
  shared->replies.errors.assign(n, std::nullopt);
  shared->waiting.assign(n, false);
  auto shared_step = std::make_shared<std::function<T(QuorumChannel&)>>(std::move(step));
  for (std::size_t i = 0; i < n; ++i) {
    if (!involved[i]) {
      continue;
    }
    {
      std::lock_guard<std::mutex> guard(shared->mutex);
      ++shared->replies.pending;
      shared->waiting[i] = true;
    }
    const bool queued =
        post(*m_channels[i], [shared, shared_step, i, deadline](QuorumChannel& channel) {
          std::optional<T> value;
          std::optional<Error> error;
          try {
            channel.deadline = deadline;
            if (channel.store) {
              channel.store->set_deadline(deadline);
            }
            value = (*shared_step)(channel);
          } catch (const Error& e) {
            error = e;
          } catch (const std::exception& e) {
            error = Error(ErrorKind::internal, channel.spec.name, e.what());
          }
          {
            std::lock_guard<std::mutex> guard(shared->mutex);
            shared->replies.values[i] = std::move(value);
            shared->replies.errors[i] = std::move(error);
            shared->replies.answered += shared->replies.values[i] ? 1 : 0;
            shared->replies.failed += shared->replies.errors[i] ? 1 : 0;
            --shared->replies.pending;
            shared->waiting[i] = false;
          }
          shared->replied.notify_all();
        });
    if (!queued) {
      std::lock_guard<std::mutex> guard(shared->mutex);
      shared->replies.errors[i] =
          Error(ErrorKind::unavailable, m_channels[i]->spec.name,
                "still no reply to earlier requests (a stopped or unreachable server)");
      ++shared->replies.failed;
      --shared->replies.pending;
      shared->waiting[i] = false;
    }
  }
  std::unique_lock<std::mutex> lock(shared->mutex);
  const auto all_in = [&] { return shared->replies.pending == 0; };
  Decision decision = Decision::open;
  const auto decided = [&] {
    decision = all_in() ? Decision::succeeded : enough(shared->replies);
    return decision != Decision::open;
  };
  // Waits for `done` until the monotonic instant `until` at the latest.
  const auto wait = [&](const auto& done, std::optional<Micros> until) {
    if (!until) {
      shared->replied.wait(lock, done);
      return;
    }
    while (!done() && util::mono_now() < *until) {
      shared->replied.wait_for(lock,
                               std::chrono::microseconds((*until - util::mono_now()).count() + 1));
    }
  };
  wait(decided, wait_until);
  // Unless it succeeded, the stragglers get a moment more: healthy servers
  // answer within it, so the counts in a message and status's view of every
  // server are not left behind, and only a server that does not answer costs
  // it. A success waits for nobody: the others' part goes on in their queues.
  if (decision != Decision::succeeded) {
    const Micros grace_end = util::mono_now() + grace.value_or(k_straggler_grace);
    wait(all_in, wait_until ? std::min(*wait_until, grace_end) : grace_end);
  }
  Replies<T> out = shared->replies;
  for (std::size_t i = 0; i < n; ++i) {
    if (shared->waiting[i]) {
      out.errors[i] = Error(ErrorKind::unavailable, m_channels[i]->spec.name,
                            "no reply yet (the others decided the step)");
    }
  }
  return out;
}

QuorumLock::QuorumLock(std::vector<QuorumServer> servers, Clock& clock, std::string key)
    : m_clock(clock), m_key(std::move(key)) {
  if (servers.size() < 2) {
    throw Error(ErrorKind::internal, "quorum", "needs at least two servers");
  }
  check_lock_key(m_key);  // as Lock does, before any server is asked
  // The workers never take a signal: they start with every signal blocked that
  // may be blocked (they inherit this thread's mask), whether or not the caller
  // has blocked them yet for its signalfd (run-locked forwards them to the job).
  struct MaskedWhileStarting {
    MaskedWhileStarting() {
      sigset_t all;
      sigfillset(&all);
      for (const int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) {
        sigdelset(&all, synchronous);  // a fault must still end the process as it should
      }
      pthread_sigmask(SIG_BLOCK, &all, &original);
    }
    ~MaskedWhileStarting() { pthread_sigmask(SIG_SETMASK, &original, nullptr); }
    sigset_t original{};
  } masked;
  for (auto& spec : servers) {
    auto channel = std::make_shared<QuorumChannel>(std::move(spec), m_key);
    try {
      // The worker holds the channel too: if it must be left behind at exit
      // (a stopped server), what it works on stays alive with it.
      channel->worker = std::thread([channel] { serve(channel); });
    } catch (const std::system_error&) {
      // No thread to be had: this server's jobs run on the caller's thread.
    }
    m_channels.push_back(std::move(channel));
  }
}

QuorumLock::~QuorumLock() {
  // Queued jobs finish first (the holder record of `lock` must be written), but
  // a server that does not answer keeps nobody past a bounded wait: its worker
  // is then left to finish (or be ended by the process's exit) on its own.
  settle(k_exit_patience);
  for (auto& channel : m_channels) {
    std::unique_lock<std::mutex> lock(channel->mutex);
    const bool idle = channel->backlog == 0;
    channel->stop = true;
    lock.unlock();
    channel->wake.notify_all();
    if (channel->worker.joinable()) {
      if (idle) {
        channel->worker.join();
      } else {
        util::trace("quorum: not waiting for " + channel->spec.name);
        channel->worker.detach();
      }
    }
  }
}

bool QuorumLock::settle(Micros timeout) {
  const Micros until = util::mono_now() + timeout;
  bool idle = true;
  for (auto& channel : m_channels) {
    std::unique_lock<std::mutex> lock(channel->mutex);
    while (channel->backlog > 0 && util::mono_now() < until) {
      channel->idle.wait_for(lock,
                             std::chrono::microseconds((until - util::mono_now()).count() + 1));
    }
    idle = idle && channel->backlog == 0;
  }
  return idle;
}

void QuorumLock::set_deadline(std::optional<Micros> monotonic_deadline) {
  m_deadline = monotonic_deadline;
}

Error QuorumLock::no_majority(std::size_t answered,
                              const std::vector<std::optional<Error>>& errors) const {
  std::string why = "only " + std::to_string(answered) + " of " +
                    std::to_string(m_channels.size()) + " servers answered (a majority is " +
                    std::to_string(majority_of(m_channels.size())) + ")";
  for (const auto& error : errors) {
    if (error) {
      why += ": " + std::string(error->what());
      break;
    }
  }
  return Error(ErrorKind::unavailable, "lock '" + m_key + "'", why);
}

void QuorumLock::undo(const std::string& value, const std::vector<bool>& keep) {
  // Best effort, and briefly: a server that did not answer the steps will not
  // answer this either, and our value expires there on its own. Queued behind
  // the step it undoes on each server, so it runs after it even there.
  const Micros bound = util::mono_now() + k_undo_patience;
  std::vector<bool> involved(keep.size());
  for (std::size_t i = 0; i < keep.size(); ++i) {
    involved[i] = !keep[i];
  }
  const std::string key = m_key;
  const auto replies = ask<bool>(
      [value, key](QuorumChannel& channel) {
        if (!channel.store) {
          return false;
        }
        const bool deleted = channel.store->compare_and_delete(key, value);
        if (deleted && util::tracing()) {
          util::trace("quorum: undone on " + channel.spec.name + ": DEL-IF-EQUAL " + key + " " +
                      value);
        }
        return deleted;
      },
      [](const Replies<bool>&) { return Decision::open; },
      m_deadline ? std::min(*m_deadline, bound) : bound, involved, bound);
  for (const auto& error : replies.errors) {
    if (error) {
      // Best effort: our value expires on its own there.
      util::trace(std::string("quorum: not undone: ") + error->what());
    }
  }
}

QuorumRound QuorumLock::try_round(std::int64_t ttl) {
  const std::size_t n = m_channels.size();
  const std::size_t majority = majority_of(n);
  QuorumRound round;
  round.started = util::mono_now();
  const Micros reading = m_clock.now();
  round.now_seconds = util::whole_seconds(reading);
  round.value = std::to_string(expiry_for(round.now_seconds, ttl));
  round.servers.assign(n, {});

  // No reply that comes after the validity window may count, so none is waited for.
  const Micros window_end = validity_end(round.started, ttl);
  // Decided once a majority took it, or once too few are left to make one.
  const auto replies = ask<Attempt>(
      [reading, ttl](QuorumChannel& channel) {
        // Every server's Lock reads the same frozen reading: the same value everywhere.
        channel.clock.set(reading);
        Lock& lock = channel.open();
        Attempt attempt;
        for (int tries = 0; tries < k_tries_per_round; ++tries) {
          attempt = lock.try_once(ttl);
          if (attempt.outcome != Attempt::Outcome::retry) {
            break;
          }
        }
        return attempt;
      },
      [majority](const Replies<Attempt>& so_far) {
        std::size_t took = 0;
        for (const auto& attempt : so_far.values) {
          took += attempt && attempt->outcome == Attempt::Outcome::acquired ? 1 : 0;
        }
        // Lost, and whether busy (a majority answered) or unavailable (too few
        // can) is known too: a slow server is not taken for a dead one.
        const bool lost = took + so_far.pending < majority;
        const bool known =
            so_far.answered >= majority || so_far.answered + so_far.pending < majority;
        return took >= majority ? Decision::succeeded
               : lost && known  ? Decision::decided
                                : Decision::open;
      },
      m_deadline ? std::min(*m_deadline, window_end) : window_end, everyone());
  round.ended = util::mono_now();
  const auto& errors = replies.errors;

  const Error* hard_error = nullptr;
  std::vector<bool> keep(n, false);
  std::map<std::int64_t, std::size_t> busy_counts;
  for (std::size_t i = 0; i < n; ++i) {
    if (errors[i]) {
      round.servers[i].error = errors[i];
      if (!hard_error && errors[i]->kind() != ErrorKind::unavailable) {
        hard_error = &*errors[i];
      }
      continue;
    }
    ++round.answered;
    round.servers[i].attempt = replies.values[i];
    const Attempt& attempt = *round.servers[i].attempt;
    if (attempt.outcome == Attempt::Outcome::acquired) {
      ++round.acquired_on;
      continue;
    }
    keep[i] = true;  // nothing of ours was written there
    if (attempt.outcome == Attempt::Outcome::busy) {
      ++busy_counts[attempt.held_until];
      round.first_expiry = round.first_expiry == 0
                               ? attempt.held_until
                               : std::min(round.first_expiry, attempt.held_until);
    }
  }
  // The holder's value is the one most busy servers report (the later one on a tie).
  std::size_t most = 0;
  for (const auto& [held_until, count] : busy_counts) {
    if (count >= most) {
      most = count;
      round.held_until = held_until;
      round.held_on = count;
    }
  }
  round.acquired =
      !hard_error && quorum_holds(round.acquired_on, n, round.started, round.ended, ttl);
  if (round.acquired) {
    std::vector<bool> took(n);
    for (std::size_t i = 0; i < n; ++i) {
      took[i] = !keep[i] && !errors[i];
    }
    round.acquired = raise_fences(round, took, ttl);
  }
  if (util::tracing()) {
    util::trace("quorum: " + round.value + " acquired on " + std::to_string(round.acquired_on) +
                " of " + std::to_string(n) + " (" + std::to_string(round.answered) +
                " answered, majority " + std::to_string(majority_of(n)) + ") in " +
                millis_text(round.ended - round.started) +
                (round.acquired ? ", fence " + std::to_string(round.fence) + " on " +
                                      std::to_string(round.fenced_on) + ", valid for " +
                                      millis_text(window_end - round.ended)
                                : ""));
  }
  if (!round.acquired) {
    // Undo wherever we took it, and wherever no reply came: the write may have
    // been made even so.
    if (round.acquired_on > 0 || round.answered < n) {
      undo(round.value, keep);
    }
    if (hard_error) {
      throw *hard_error;
    }
    return round;
  }
  m_written.push_back(round.value);
  m_fence = round.fence;
  return round;
}

bool QuorumLock::raise_fences(QuorumRound& round, const std::vector<bool>& acquired,
                              std::int64_t ttl) {
  // Why the highest of our servers' tokens, once a majority's counters hold it,
  // is above every earlier quorum token: an earlier acquisition that reached a
  // majority left its token T' in the counters of a majority M' (raised there, or
  // issued there). Our majority M meets M' in at least one server, any two
  // majorities of the same servers intersect, and that server's counter only
  // grows: the token it issued us is above T', so our max is too. And ours is in
  // turn left on a majority for the next one. A server's counter is only raised
  // while it still holds the token it issued us (Lock::raise_fence), so a raise
  // never lands after another acquisition there; and only within the validity
  // window, like the acquisition itself.
  const std::size_t n = m_channels.size();
  round.fence = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (acquired[i]) {
      round.fence = std::max(round.fence, round.servers[i].attempt->fence);
    }
  }
  std::vector<bool> at_token(n, false);
  round.fenced_on = 0;
  for (std::size_t i = 0; i < n; ++i) {
    at_token[i] = acquired[i] && round.servers[i].attempt->fence == round.fence;
    round.fenced_on += at_token[i] ? 1 : 0;
  }
  // Servers whose counters keep in step (every quorum acquisition raises them)
  // issue the same token: a majority holds it already, no round trip is needed.
  if (round.fenced_on >= majority_of(n)) {
    return true;
  }
  const Micros window_end = validity_end(round.started, ttl);
  std::vector<bool> involved(n);
  for (std::size_t i = 0; i < n; ++i) {
    involved[i] = acquired[i] && !at_token[i];
  }
  const std::size_t majority = majority_of(n);
  const std::size_t level = round.fenced_on;
  const std::int64_t token = round.fence;
  const auto replies =
      ask<bool>([token](QuorumChannel& channel) { return channel.open().raise_fence(token); },
                [majority, level](const Replies<bool>& so_far) {
                  std::size_t raised = level;
                  for (const auto& value : so_far.values) {
                    raised += value && *value ? 1 : 0;
                  }
                  return raised >= majority                   ? Decision::succeeded
                         : raised + so_far.pending < majority ? Decision::decided
                                                              : Decision::open;
                },
                m_deadline ? std::min(*m_deadline, window_end) : window_end, involved);
  round.ended = util::mono_now();
  for (std::size_t i = 0; i < n; ++i) {
    if (replies.errors[i]) {
      util::trace(std::string("quorum: fence not raised: ") + replies.errors[i]->what());
    }
    round.fenced_on += replies.values[i] && *replies.values[i] ? 1 : 0;
  }
  if (util::tracing()) {
    util::trace("quorum: fence " + std::to_string(round.fence) + " raised, held on " +
                std::to_string(round.fenced_on) + " of " + std::to_string(n));
  }
  return quorum_holds(round.fenced_on, n, round.started, round.ended, ttl);
}

AcquireResult QuorumLock::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  const std::size_t n = m_channels.size();
  const bool forever = !policy.wait_for.has_value();
  const Micros started = util::mono_now();
  const Micros deadline = started + policy.wait_for.value_or(Micros(0));
  std::vector<std::shared_ptr<store::Watcher>> watchers(n);
  // wait_any() on the watchers of the servers whose workers are idle: a watcher
  // reads its store's deadline, which a job still running there may be setting.
  const auto wait_on_idle = [&](std::vector<std::shared_ptr<store::Watcher>>& all, Micros timeout,
                                int interrupt_fd) {
    std::vector<std::shared_ptr<store::Watcher>> usable(n);
    std::vector<bool> passed(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      std::lock_guard<std::mutex> guard(m_channels[i]->mutex);
      passed[i] = all[i] && m_channels[i]->backlog == 0;
      usable[i] = passed[i] ? all[i] : nullptr;
    }
    const auto result = wait_any(usable, timeout, interrupt_fd);
    for (std::size_t i = 0; i < n; ++i) {
      if (passed[i] && !usable[i]) {
        all[i].reset();  // dropped by wait_any(): armed again later
      }
    }
    return result;
  };
  bool armed = false;
  int splits = 0;
  std::int64_t last_held_until = 0;

  for (;;) {
    const QuorumRound round = try_round(ttl);
    if (round.acquired) {
      AcquireResult result;
      result.outcome = AcquireResult::Outcome::acquired;
      result.value = round.value;
      result.now_seconds = round.now_seconds;
      // Held at least until valid_from + ttl, as every client's clock sees it.
      result.valid_from = round.started - drift_margin(ttl);
      result.fence = round.fence;
      return result;
    }
    const Micros now_mono = util::mono_now();
    const bool out_of_time = !forever && now_mono >= deadline;
    const auto interrupted = [&] {
      AcquireResult result;
      result.outcome = AcquireResult::Outcome::interrupted;
      result.held_until = last_held_until;
      return result;
    };

    if (round.answered < majority_of(n)) {
      // As on one server: once waiting, servers that fail for a while are
      // waited out until the wait's end; a first attempt that fails says so at once.
      std::vector<std::optional<Error>> errors;
      for (const auto& server : round.servers) {
        errors.push_back(server.error);
      }
      if (!armed || out_of_time) {
        throw no_majority(round.answered, errors);
      }
      util::trace("waiting on: " + std::string(no_majority(round.answered, errors).what()));
      Micros timeout = pacing::jittered_poll();
      if (!forever) {
        timeout = std::min(timeout, deadline - now_mono);
      }
      if (wait_on_idle(watchers, timeout, policy.interrupt_fd) == store::WaitResult::interrupted) {
        return interrupted();
      }
      continue;
    }

    last_held_until = round.held_until;
    // A split: we took some servers, and no other holder has a majority either
    // (another taker did the same), or we took a majority too late.
    const bool split = round.acquired_on > 0 && round.held_on < majority_of(n);
    if (out_of_time && !(split && splits < k_split_retries)) {
      AcquireResult result;
      result.outcome = AcquireResult::Outcome::busy;
      result.held_until = round.held_until;
      result.held_value = std::to_string(round.held_until);
      result.now_seconds = round.now_seconds;
      return result;
    }
    if (split) {
      // Two takers split the servers and both undid theirs: neither holds it.
      // Not woken by each other's undo: a random pause, then look again.
      ++splits;
      if (wait_readable(policy.interrupt_fd,
                        util::random_between(k_split_pause_min, k_split_pause_max))) {
        return interrupted();
      }
      continue;
    }
    // Arm a watch on every server that answered (again, where one was dropped),
    // then look again: a release between our look and the watch would go unseen.
    bool newly_armed = false;
    std::vector<bool> unwatched(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      unwatched[i] = !watchers[i] && round.servers[i].attempt.has_value();
    }
    if (std::find(unwatched.begin(), unwatched.end(), true) != unwatched.end()) {
      const auto armed_now = ask<std::shared_ptr<store::Watcher>>(
          [](QuorumChannel& channel) {
            channel.open();
            return std::shared_ptr<store::Watcher>(channel.store->watch(channel.key));
          },
          [](const Replies<std::shared_ptr<store::Watcher>>&) { return Decision::open; },
          m_deadline, unwatched, util::mono_now() + k_undo_patience);
      for (std::size_t i = 0; i < n; ++i) {
        if (armed_now.values[i] && *armed_now.values[i]) {
          watchers[i] = *armed_now.values[i];
          newly_armed = true;
        } else if (armed_now.errors[i]) {
          util::trace(std::string("quorum: no watch: ") + armed_now.errors[i]->what());
        }
      }
    }
    if (!armed || newly_armed) {
      armed = true;
      continue;
    }
    // Wake at the earliest expiry a busy server reported, a release, or a poll tick.
    Micros timeout = round.first_expiry > 0
                         ? pacing::until_next_look(round.first_expiry, m_clock.now())
                         : pacing::jittered_poll();
    if (!forever) {
      timeout = std::min(timeout, deadline - now_mono);
    }
    if (policy.on_wait) {
      policy.on_wait(WaitProgress{round.held_until, round.now_seconds, now_mono - started});
      timeout = std::min(timeout, pacing::k_progress_interval);
    }
    if (wait_on_idle(watchers, timeout, policy.interrupt_fd) == store::WaitResult::interrupted) {
      return interrupted();
    }
  }
}

Verdict QuorumLock::tally(const std::vector<std::optional<Verdict>>& verdicts,
                          const std::vector<std::optional<Error>>& errors, const char* doing) {
  const std::size_t n = m_channels.size();
  std::size_t unanswered = 0;
  const Error* first = nullptr;
  for (const auto& error : errors) {
    if (error && error->kind() != ErrorKind::unavailable) {
      throw *error;
    }
    if (error) {
      ++unanswered;
      first = first ? first : &*error;
    }
  }
  std::map<Verdict, std::size_t> counts;
  for (const auto& verdict : verdicts) {
    if (verdict) {
      ++counts[*verdict];
    }
  }
  const std::size_t done = counts[Verdict::done];
  if (done >= majority_of(n)) {
    return Verdict::done;
  }
  if (done + unanswered >= majority_of(n)) {
    // The servers that did not answer could make it a majority or not: unknown.
    throw Error(ErrorKind::unavailable, "lock '" + m_key + "'",
                std::string(doing) + " on " + std::to_string(done) + " of " + std::to_string(n) +
                    " servers, " + std::to_string(unanswered) + " did not answer (a majority is " +
                    std::to_string(majority_of(n)) + "): " + first->what());
  }
  // Not ours on a majority: say why as most of them do.
  Verdict why = Verdict::taken_over;
  std::size_t most = 0;
  for (const Verdict verdict : {Verdict::taken_over, Verdict::expired, Verdict::absent}) {
    if (counts[verdict] > most) {
      most = counts[verdict];
      why = verdict;
    }
  }
  return why;
}

Verdict QuorumLock::release(std::string_view value) {
  parse_user_value(m_key, value);  // a usage error before any server is touched
  std::vector<std::optional<Verdict>> verdicts;
  return on_every_holder(
      value, m_clock.now(), [](Lock& lock, std::string_view v) { return lock.release(v); },
      "released", verdicts);
}

Verdict QuorumLock::on_every_holder(std::string_view value, Micros reading,
                                    std::function<Verdict(Lock&, std::string_view)> step,
                                    const char* doing,
                                    std::vector<std::optional<Verdict>>& verdicts) {
  const std::size_t majority = majority_of(m_channels.size());
  // Copies for the jobs: one may run after this call returns.
  const std::string first(value);
  const std::vector<std::string> written = m_written;
  const auto replies = ask<Verdict>(
      [first, written, reading, step](QuorumChannel& channel) {
        channel.clock.set(reading);
        Lock& lock = channel.open();
        return on_value_or_earlier(
            first, written, [&](const std::string& candidate) { return step(lock, candidate); });
      },
      // Decided once a majority did it, or once it cannot be one even if the
      // servers that failed or are yet to reply did it: then it is not ours
      // (tally() says unavailable only while they could still make it one).
      [majority](const Replies<Verdict>& so_far) {
        std::size_t done = 0;
        for (const auto& verdict : so_far.values) {
          done += verdict == Verdict::done ? 1 : 0;
        }
        return done >= majority                                   ? Decision::succeeded
               : done + so_far.pending + so_far.failed < majority ? Decision::decided
                                                                  : Decision::open;
      },
      m_deadline, everyone());
  verdicts = replies.values;
  return tally(verdicts, replies.errors, doing);
}

Verdict QuorumLock::release_after(std::string_view value, Micros not_before,
                                  std::string& kept_value) {
  kept_value.clear();
  const Micros reading = m_clock.now();
  if (not_before <= reading) {
    return release(value);
  }
  parse_user_value(m_key, value);
  std::vector<std::optional<Verdict>> verdicts;
  const Verdict verdict = on_every_holder(
      value, reading,
      [not_before](Lock& lock, std::string_view v) {
        std::string kept;
        return lock.release_after(v, not_before, kept);
      },
      "kept for --hold", verdicts);
  if (verdict == Verdict::done) {
    kept_value = std::to_string(expiry_holding_until(not_before));
  }
  return verdict;
}

Verdict QuorumLock::renew(std::string_view value, std::int64_t ttl, std::string& new_value) {
  parse_user_value(m_key, value);
  const Micros reading = m_clock.now();
  const std::int64_t now = util::whole_seconds(reading);
  const std::string next = std::to_string(expiry_for(now, ttl));
  new_value = next;  // before the writes: see the contract in lock.hpp
  // Values that have expired can be nobody's now: no need to try them again.
  std::erase_if(m_written, [&](const std::string& v) {
    const auto parsed = parse_lock_value(v);
    return !parsed || *parsed < now;
  });
  if (std::find(m_written.begin(), m_written.end(), next) == m_written.end()) {
    m_written.push_back(next);
  }
  std::vector<std::optional<Verdict>> verdicts;
  const Verdict verdict = on_every_holder(
      value, reading,
      [ttl](Lock& lock, std::string_view v) {
        std::string written;
        return lock.renew(v, ttl, written);
      },
      "renewed", verdicts);
  if (verdict != Verdict::done) {
    // Lost on a majority: the minority that renewed lets go, so the next taker
    // need not wait for it to expire.
    std::vector<bool> keep(m_channels.size());
    for (std::size_t i = 0; i < keep.size(); ++i) {
      keep[i] = verdicts[i] && verdicts[i] != Verdict::done;
    }
    undo(next, keep);
  }
  return verdict;
}

void QuorumLock::record_holder(Holder holder) {
  // Advisory details: the caller (the job, or `lock`'s output) need not wait for
  // any server; the jobs run in order on each server's queue, and the
  // destructor gives them a bounded time to finish.
  for (auto& channel : m_channels) {
    post(*channel, [holder](QuorumChannel& c) {
      try {
        c.open().record_holder(holder);
      } catch (const std::exception& e) {
        util::trace(std::string("holder details not recorded: ") + e.what());
      }
    });
  }
}

std::optional<Holder> QuorumLock::holder_of(std::string_view value) {
  const std::size_t majority = majority_of(m_channels.size());
  const std::string wanted(value);
  const auto replies = ask<std::optional<Holder>>(
      [wanted](QuorumChannel& channel) { return channel.open().holder_of(wanted); },
      // Every holder's record is on every server it took: one is enough, and a
      // majority without one says there is none.
      [majority](const Replies<std::optional<Holder>>& so_far) {
        for (const auto& holder : so_far.values) {
          if (holder && *holder) {
            return Decision::succeeded;
          }
        }
        return so_far.answered >= majority ? Decision::decided : Decision::open;
      },
      m_deadline, everyone());
  for (const auto& holder : replies.values) {
    if (holder && *holder) {
      return *holder;
    }
  }
  return std::nullopt;
}

bool QuorumLock::force_release(std::optional<std::string>& holder_problem) {
  struct Removal {
    bool removed = false;
    std::optional<std::string> problem;
  };
  const std::size_t majority = majority_of(m_channels.size());
  const auto replies = ask<Removal>(
      [](QuorumChannel& channel) {
        Removal removal;
        removal.removed = channel.open().force_release(removal.problem);
        return removal;
      },
      [majority](const Replies<Removal>& so_far) {
        return so_far.answered >= majority ? Decision::decided : Decision::open;
      },
      m_deadline, everyone());
  std::size_t answered = 0;
  bool removed = false;
  for (std::size_t i = 0; i < m_channels.size(); ++i) {
    const auto& error = replies.errors[i];
    if (error && error->kind() != ErrorKind::unavailable) {
      throw *error;
    }
    if (const auto& removal = replies.values[i]) {
      ++answered;
      removed = removed || removal->removed;
      if (removal->problem && !holder_problem) {
        holder_problem = removal->problem;
      }
    }
  }
  if (answered < majority) {
    throw no_majority(answered, replies.errors);
  }
  return removed;
}

Status QuorumLock::status() {
  const std::size_t n = m_channels.size();
  const std::size_t majority = majority_of(n);
  const Micros reading = m_clock.now();
  const auto replies = ask<Status>(
      [reading](QuorumChannel& channel) {
        channel.clock.set(reading);
        return channel.open().status();
      },
      // Decided once a majority holds one value, or once none can and a majority answered.
      [majority](const Replies<Status>& so_far) {
        std::map<std::string, std::size_t> counts;
        std::size_t most = 0;
        for (const auto& status : so_far.values) {
          if (status && status->state != Status::State::free) {
            most = std::max(most, ++counts[status->value]);
          }
        }
        const bool decided =
            most >= majority || (so_far.answered >= majority && most + so_far.pending < majority);
        return decided ? Decision::decided : Decision::open;
      },
      m_deadline, everyone(), std::nullopt, k_status_grace);
  const auto& statuses = replies.values;
  const auto& errors = replies.errors;

  m_views.clear();
  std::size_t answered = 0;
  // Per value: how many servers hold it, how many hold it expired, and the first that has it.
  std::map<std::string, std::size_t> held;
  std::map<std::string, std::size_t> expired;
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < n; ++i) {
    ServerView view;
    view.server = m_channels[i]->spec.name;
    if (errors[i]) {
      if (errors[i]->kind() != ErrorKind::unavailable) {
        throw *errors[i];
      }
      view.state = ServerView::State::unavailable;
      view.error = errors[i]->what();
      m_views.push_back(std::move(view));
      continue;
    }
    ++answered;
    const Status& status = *statuses[i];
    view.value = status.value;
    switch (status.state) {
      case Status::State::free:
        view.state = ServerView::State::free;
        break;
      case Status::State::expired:
        view.state = ServerView::State::expired;
        ++expired[status.value];
        first.emplace(status.value, i);
        break;
      case Status::State::held:
        view.state = ServerView::State::held;
        ++held[status.value];
        first.emplace(status.value, i);
        break;
    }
    m_views.push_back(std::move(view));
  }

  const auto majority_value = [&](const std::map<std::string, std::size_t>& counts) {
    for (const auto& [value, count] : counts) {
      if (count >= majority_of(n)) {
        return std::optional<std::string>(value);
      }
    }
    return std::optional<std::string>();
  };
  // The quorum's token: the highest that a majority of the servers holding
  // `value` carry (a holder's acquisition left its token on a majority of them;
  // a server that took the lock after the majority had it issued a token of its
  // own, above it, since tokens follow each server's clock), or the highest
  // among all that answered (the latest token issued anywhere).
  const auto highest_fence = [&](const std::string* value) {
    std::vector<std::int64_t> fences;
    for (std::size_t i = 0; i < n; ++i) {
      if (statuses[i] && statuses[i]->fence && (!value || statuses[i]->value == *value)) {
        fences.push_back(*statuses[i]->fence);
      }
    }
    if (fences.empty()) {
      return std::optional<std::int64_t>();
    }
    std::sort(fences.begin(), fences.end(), std::greater<>());
    const std::size_t at = value ? std::min(majority_of(n), fences.size()) - 1 : 0;
    return std::optional<std::int64_t>(fences[at]);
  };
  Status out;
  out.now_seconds = util::whole_seconds(reading);
  if (const auto value = majority_value(held)) {
    out = *statuses[first[*value]];
    out.now_seconds = util::whole_seconds(reading);
    out.fence = highest_fence(&*value);
    return out;
  }
  if (answered < majority_of(n)) {
    throw no_majority(answered, errors);
  }
  if (const auto value = majority_value(expired)) {
    out = *statuses[first[*value]];
    out.now_seconds = util::whole_seconds(reading);
    out.holder.reset();
  }
  out.fence = highest_fence(nullptr);
  return out;
}

}  // namespace nxlock::lock
