// QuorumLock: the documented steps on every server at once, held by a majority.
#include "lock/quorum.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "util/fd.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::Error;
using util::ErrorKind;
using util::Micros;

// As Lock::acquire: waiters also poll, for holders that never signal.
constexpr Micros k_poll_min{100'000};
constexpr Micros k_poll_max{300'000};
constexpr Micros k_expiry_slack{2'000};
constexpr Micros k_progress_interval{1'000'000};
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

Micros random_between(Micros low, Micros high) {
  static thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<std::int64_t> dist(low.count(), high.count());
  return Micros(dist(rng));
}

int to_poll_ms(Micros timeout) {
  return static_cast<int>(std::max<std::int64_t>(0, (timeout.count() + 999) / 1000));
}

// True if `fd` (ignored if negative) becomes readable within `timeout`.
bool wait_readable(int fd, Micros timeout) {
  pollfd pfd{fd, POLLIN, 0};
  const Micros until = util::mono_now() + timeout;
  for (;;) {
    const int ready = poll(&pfd, 1, to_poll_ms(until - util::mono_now()));
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
store::WaitResult wait_any(std::vector<std::unique_ptr<store::Watcher>>& watchers, Micros timeout,
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
  while (poll(fds, 2, to_poll_ms(until - util::mono_now())) < 0 && errno == EINTR) {
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

// Every server's Lock reads this clock: one reading of the caller's clock per
// round, so that each server is given the same value and judged at the same instant.
class QuorumLock::FrozenClock final : public Clock {
 public:
  void set(Micros reading) { m_reading = reading; }
  Micros now() override { return m_reading; }

 private:
  Micros m_reading{0};
};

// One thread per server but the first (which the caller's thread serves), kept
// for the lock's life: a round costs a wake-up per server, not a thread start.
class QuorumLock::Workers {
 public:
  explicit Workers(std::size_t count) {
    try {
      for (std::size_t i = 1; i <= count; ++i) {
        m_threads.emplace_back([this, i] { serve(i); });
      }
    } catch (const std::system_error&) {
      // No thread to be had: the ones that started serve, the caller runs the rest.
    }
  }
  ~Workers() {
    wait_idle();  // a posted job finishes first: the holder record of `lock` must be written
    {
      std::lock_guard<std::mutex> guard(m_mutex);
      m_stop = true;
    }
    m_work.notify_all();
    for (auto& thread : m_threads) {
      thread.join();
    }
  }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // Runs job(0..count) at once, job(0) on this thread; returns when all are done.
  // `job` must not throw.
  void run(const std::function<void(std::size_t)>& job, std::size_t count) {
    start(job, count);
    wait_idle();
  }

  // As run(), but returns once job(0) is done here, leaving the others to the
  // workers: the next run(), post() or wait_idle() waits for them first.
  void post(std::function<void(std::size_t)> job, std::size_t count) {
    wait_idle();
    m_posted = std::move(job);
    start(m_posted, count);
  }

  // Returns when no job is running on a worker.
  void wait_idle() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_done.wait(lock, [this] { return m_pending == 0; });
  }

 private:
  void start(const std::function<void(std::size_t)>& job, std::size_t count) {
    wait_idle();
    {
      std::lock_guard<std::mutex> guard(m_mutex);
      m_job = &job;
      m_pending = m_threads.size();
      ++m_generation;
    }
    m_work.notify_all();
    job(0);
    for (std::size_t i = m_threads.size() + 1; i <= count; ++i) {
      job(i);
    }
  }

  void serve(std::size_t index) {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
      m_work.wait(lock, [&] { return m_stop || m_generation != seen; });
      if (m_stop) {
        return;
      }
      seen = m_generation;
      const auto* job = m_job;
      lock.unlock();
      (*job)(index);
      lock.lock();
      if (--m_pending == 0) {
        m_done.notify_one();
      }
    }
  }

  std::mutex m_mutex;
  std::condition_variable m_work;
  std::condition_variable m_done;
  const std::function<void(std::size_t)>* m_job = nullptr;
  std::function<void(std::size_t)> m_posted;  // post()'s job, kept until it is done
  std::uint64_t m_generation = 0;
  std::size_t m_pending = 0;
  bool m_stop = false;
  std::vector<std::thread> m_threads;
};

struct QuorumLock::Server {
  QuorumServer spec;
  std::unique_ptr<store::Store> store;  // open once it answered a connect
  std::unique_ptr<Lock> lock;
};

QuorumLock::QuorumLock(std::vector<QuorumServer> servers, Clock& clock, std::string key)
    : m_clock(clock), m_frozen(std::make_unique<FrozenClock>()), m_key(std::move(key)) {
  if (servers.size() < 2) {
    throw Error(ErrorKind::internal, "quorum", "needs at least two servers");
  }
  for (auto& spec : servers) {
    m_servers.push_back(std::make_unique<Server>(Server{std::move(spec), nullptr, nullptr}));
  }
}

QuorumLock::~QuorumLock() = default;

Lock& QuorumLock::open(Server& server) {
  if (!server.lock) {
    server.store = server.spec.open();
    if (m_applied) {
      server.store->set_deadline(m_applied);
    }
    server.lock = std::make_unique<Lock>(*server.store, *m_frozen, m_key);
  }
  return *server.lock;
}

void QuorumLock::apply_deadline(std::optional<Micros> deadline) {
  if (m_workers) {
    m_workers->wait_idle();  // a posted job may be using the stores
  }
  m_applied = deadline;
  for (auto& server : m_servers) {
    if (server->store) {
      server->store->set_deadline(deadline);
    }
  }
}

void QuorumLock::set_deadline(std::optional<Micros> monotonic_deadline) {
  m_deadline = monotonic_deadline;
  apply_deadline(monotonic_deadline);
}

void QuorumLock::on_every_server(const std::function<void(Server&, std::size_t)>& step,
                                 std::vector<std::optional<Error>>& errors) {
  errors.assign(m_servers.size(), std::nullopt);
  const auto run = [&](std::size_t i) {
    try {
      step(*m_servers[i], i);
    } catch (const Error& e) {
      errors[i] = e;
    } catch (const std::exception& e) {
      errors[i] = Error(ErrorKind::internal, m_servers[i]->spec.name, e.what());
    }
  };
  // Every server at once: a round costs the slowest server's round trips, not their sum.
  if (!m_workers) {
    m_workers = std::make_unique<Workers>(m_servers.size() - 1);
  }
  m_workers->run(run, m_servers.size() - 1);
}

Error QuorumLock::no_majority(std::size_t answered,
                              const std::vector<std::optional<Error>>& errors) const {
  std::string why = "only " + std::to_string(answered) + " of " + std::to_string(m_servers.size()) +
                    " servers answered (a majority is " +
                    std::to_string(majority_of(m_servers.size())) + ")";
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
  // answer this either, and our value expires there on its own.
  const Micros bound = util::mono_now() + k_undo_patience;
  apply_deadline(m_deadline ? std::min(*m_deadline, bound) : bound);
  std::vector<std::optional<Error>> errors;
  on_every_server(
      [&](Server& server, std::size_t i) {
        if (keep[i] || !server.store) {
          return;
        }
        const bool deleted = server.store->compare_and_delete(m_key, value);
        if (deleted && util::tracing()) {
          util::trace("quorum: undone on " + server.spec.name + ": DEL-IF-EQUAL " + m_key + " " +
                      value);
        }
      },
      errors);
  apply_deadline(m_deadline);
  for (const auto& error : errors) {
    if (error) {
      // Best effort: our value expires on its own there.
      util::trace(std::string("quorum: not undone: ") + error->what());
    }
  }
}

QuorumRound QuorumLock::try_round(std::int64_t ttl) {
  const std::size_t n = m_servers.size();
  QuorumRound round;
  round.started = util::mono_now();
  m_frozen->set(m_clock.now());
  round.now_seconds = util::whole_seconds(m_frozen->now());
  round.value = std::to_string(expiry_for(round.now_seconds, ttl));
  round.servers.assign(n, {});

  // No reply that comes after the validity window may count, so none is waited for.
  const Micros window_end = validity_end(round.started, ttl);
  apply_deadline(m_deadline ? std::min(*m_deadline, window_end) : window_end);
  std::vector<std::optional<Error>> errors;
  on_every_server(
      [&](Server& server, std::size_t i) {
        Lock& lock = open(server);
        Attempt attempt;
        for (int tries = 0; tries < k_tries_per_round; ++tries) {
          // Every server's Lock reads the frozen clock: the same value everywhere.
          attempt = lock.try_once(ttl);
          if (attempt.outcome != Attempt::Outcome::retry) {
            break;
          }
        }
        round.servers[i].attempt = attempt;
      },
      errors);
  round.ended = util::mono_now();
  apply_deadline(m_deadline);

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
  const std::size_t n = m_servers.size();
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
  apply_deadline(m_deadline ? std::min(*m_deadline, window_end) : window_end);
  std::vector<char> raised(n, 0);
  std::vector<std::optional<Error>> errors;
  on_every_server(
      [&](Server& server, std::size_t i) {
        if (acquired[i] && !at_token[i] && server.lock->raise_fence(round.fence)) {
          raised[i] = 1;
        }
      },
      errors);
  round.ended = util::mono_now();
  apply_deadline(m_deadline);
  for (std::size_t i = 0; i < n; ++i) {
    if (errors[i]) {
      util::trace(std::string("quorum: fence not raised: ") + errors[i]->what());
    }
    round.fenced_on += raised[i];
  }
  if (util::tracing()) {
    util::trace("quorum: fence " + std::to_string(round.fence) + " raised, held on " +
                std::to_string(round.fenced_on) + " of " + std::to_string(n));
  }
  return quorum_holds(round.fenced_on, n, round.started, round.ended, ttl);
}

AcquireResult QuorumLock::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  const std::size_t n = m_servers.size();
  const bool forever = !policy.wait_for.has_value();
  const Micros started = util::mono_now();
  const Micros deadline = started + policy.wait_for.value_or(Micros(0));
  std::vector<std::unique_ptr<store::Watcher>> watchers(n);
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
      Micros timeout = random_between(k_poll_min, k_poll_max);
      if (!forever) {
        timeout = std::min(timeout, deadline - now_mono);
      }
      if (wait_any(watchers, timeout, policy.interrupt_fd) == store::WaitResult::interrupted) {
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
                        random_between(k_split_pause_min, k_split_pause_max))) {
        return interrupted();
      }
      continue;
    }
    // Arm a watch on every server that answered (again, where one was dropped),
    // then look again: a release between our look and the watch would go unseen.
    bool newly_armed = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (!watchers[i] && round.servers[i].attempt && m_servers[i]->store) {
        try {
          watchers[i] = m_servers[i]->store->watch(m_key);
          newly_armed = true;
        } catch (const Error& e) {
          util::trace(std::string("quorum: no watch: ") + e.what());
        }
      }
    }
    if (!armed || newly_armed) {
      armed = true;
      continue;
    }
    // Wake at the earliest expiry a busy server reported, a release, or a poll tick.
    Micros timeout = random_between(k_poll_min, k_poll_max);
    if (round.first_expiry > 0 && round.first_expiry < std::int64_t{1} << 40) {
      const Micros until_expiry =
          Micros((round.first_expiry + 1) * 1'000'000) - m_clock.now() + k_expiry_slack;
      timeout = std::min(timeout, std::max(until_expiry, k_expiry_slack));
    }
    if (!forever) {
      timeout = std::min(timeout, deadline - now_mono);
    }
    if (policy.on_wait) {
      policy.on_wait(WaitProgress{round.held_until, round.now_seconds, now_mono - started});
      timeout = std::min(timeout, k_progress_interval);
    }
    if (wait_any(watchers, timeout, policy.interrupt_fd) == store::WaitResult::interrupted) {
      return interrupted();
    }
  }
}

Verdict QuorumLock::on_any_of_ours(std::string_view value,
                                   const std::function<Verdict(Lock&, std::string_view)>& step,
                                   Server& server) {
  Lock& lock = open(server);
  Verdict verdict = step(lock, value);
  for (auto it = m_written.rbegin(); verdict != Verdict::done && it != m_written.rend(); ++it) {
    if (*it != value && step(lock, *it) == Verdict::done) {
      verdict = Verdict::done;
    }
  }
  return verdict;
}

Verdict QuorumLock::tally(const std::vector<std::optional<Verdict>>& verdicts,
                          const std::vector<std::optional<Error>>& errors, const char* doing) {
  const std::size_t n = m_servers.size();
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
  m_frozen->set(m_clock.now());
  std::vector<std::optional<Verdict>> verdicts;
  return on_every_holder(
      value, [](Lock& lock, std::string_view v) { return lock.release(v); }, "released",
      verdicts);
}

Verdict QuorumLock::on_every_holder(std::string_view value,
                                    const std::function<Verdict(Lock&, std::string_view)>& step,
                                    const char* doing,
                                    std::vector<std::optional<Verdict>>& verdicts) {
  verdicts.assign(m_servers.size(), std::nullopt);
  std::vector<std::optional<Error>> errors;
  on_every_server(
      [&](Server& server, std::size_t i) { verdicts[i] = on_any_of_ours(value, step, server); },
      errors);
  return tally(verdicts, errors, doing);
}

Verdict QuorumLock::release_after(std::string_view value, Micros not_before,
                                  std::string& kept_value) {
  kept_value.clear();
  m_frozen->set(m_clock.now());
  if (not_before <= m_frozen->now()) {
    return release(value);
  }
  parse_user_value(m_key, value);
  std::vector<std::optional<Verdict>> verdicts;
  const Verdict verdict = on_every_holder(
      value,
      [&](Lock& lock, std::string_view v) {
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
  m_frozen->set(m_clock.now());
  const std::int64_t now = util::whole_seconds(m_frozen->now());
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
      value,
      [&](Lock& lock, std::string_view v) {
        std::string written;
        return lock.renew(v, ttl, written);
      },
      "renewed", verdicts);
  if (verdict != Verdict::done) {
    // Lost on a majority: the minority that renewed lets go, so the next taker
    // need not wait for it to expire.
    std::vector<bool> keep(m_servers.size());
    for (std::size_t i = 0; i < keep.size(); ++i) {
      keep[i] = verdicts[i] != Verdict::done;
    }
    undo(next, keep);
  }
  return verdict;
}

void QuorumLock::record_holder(Holder holder) {
  // Advisory details: the caller (the job, or `lock`'s output) need not wait for
  // the slowest server; the next exchange with the servers waits for them.
  if (!m_workers) {
    m_workers = std::make_unique<Workers>(m_servers.size() - 1);
  }
  m_workers->post(
      [this, holder = std::move(holder)](std::size_t i) {
        try {
          open(*m_servers[i]).record_holder(holder);
        } catch (const std::exception& e) {
          util::trace(std::string("holder details not recorded: ") + e.what());
        }
      },
      m_servers.size() - 1);
}

std::optional<Holder> QuorumLock::holder_of(std::string_view value) {
  std::vector<std::optional<Holder>> holders(m_servers.size());
  std::vector<std::optional<Error>> errors;
  on_every_server(
      [&](Server& server, std::size_t i) { holders[i] = open(server).holder_of(value); }, errors);
  for (auto& holder : holders) {
    if (holder) {
      return holder;
    }
  }
  return std::nullopt;
}

bool QuorumLock::force_release(std::optional<std::string>& holder_problem) {
  std::vector<char> removed(m_servers.size(), 0);
  std::vector<std::optional<std::string>> problems(m_servers.size());
  std::vector<std::optional<Error>> errors;
  on_every_server(
      [&](Server& server, std::size_t i) {
        removed[i] = open(server).force_release(problems[i]) ? 1 : 0;
      },
      errors);
  std::size_t answered = 0;
  for (const auto& error : errors) {
    if (error && error->kind() != ErrorKind::unavailable) {
      throw *error;
    }
    answered += error ? 0 : 1;
  }
  for (auto& problem : problems) {
    if (problem && !holder_problem) {
      holder_problem = problem;
    }
  }
  if (answered < majority_of(m_servers.size())) {
    throw no_majority(answered, errors);
  }
  return std::find(removed.begin(), removed.end(), 1) != removed.end();
}

Status QuorumLock::status() {
  const std::size_t n = m_servers.size();
  m_frozen->set(m_clock.now());
  std::vector<std::optional<Status>> statuses(n);
  std::vector<std::optional<Error>> errors;
  on_every_server([&](Server& server, std::size_t i) { statuses[i] = open(server).status(); },
                  errors);

  m_views.clear();
  std::size_t answered = 0;
  // Per value: how many servers hold it, how many hold it expired, and the first that has it.
  std::map<std::string, std::size_t> held;
  std::map<std::string, std::size_t> expired;
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < n; ++i) {
    ServerView view;
    view.server = m_servers[i]->spec.name;
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
  // The quorum's token: the highest counter among the servers that hold `value`
  // (a holder's acquisition left its token on a majority of them, and nothing
  // above it), or among all that answered (the latest token issued anywhere).
  const auto highest_fence = [&](const std::string* value) {
    std::optional<std::int64_t> fence;
    for (std::size_t i = 0; i < n; ++i) {
      if (statuses[i] && statuses[i]->fence && (!value || statuses[i]->value == *value)) {
        fence = std::max(fence.value_or(0), *statuses[i]->fence);
      }
    }
    return fence;
  };
  Status out;
  out.now_seconds = util::whole_seconds(m_frozen->now());
  if (const auto value = majority_value(held)) {
    out = *statuses[first[*value]];
    out.now_seconds = util::whole_seconds(m_frozen->now());
    out.fence = highest_fence(&*value);
    return out;
  }
  if (answered < majority_of(n)) {
    throw no_majority(answered, errors);
  }
  if (const auto value = majority_value(expired)) {
    out = *statuses[first[*value]];
    out.now_seconds = util::whole_seconds(m_frozen->now());
    out.holder.reset();
  }
  out.fence = highest_fence(nullptr);
  return out;
}

}  // namespace nxlock::lock
