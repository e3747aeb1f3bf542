// The quorum's fan-out: one step run on every server at once, each on its own
// worker thread and queue, and the wait for enough of the replies. A detail of
// QuorumLock (quorum.hpp); only its source files include this.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lock/clock.hpp"
#include "lock/lock.hpp"
#include "lock/quorum/quorum.hpp"
#include "store/store.hpp"
#include "util/error.hpp"
#include "util/time.hpp"

namespace nxlock::lock::detail {

// A server that still owes this many replies is not asked again (see ask()).
constexpr std::size_t k_max_backlog = 2;
// Best-effort steps (undoing a round that did not hold, arming watches) wait
// this long at most for each server.
constexpr util::Micros k_best_effort_patience{500'000};
// Once a step is decided without a success, the servers yet to reply get this long more.
constexpr util::Micros k_straggler_grace{50'000};

// Whether a step is queued on a server that still owes k_max_backlog replies.
enum class Backlog {
  capped,  // not queued: it counts as not answering (a stopped server's queue does not grow)
  exempt,  // queued even so: a release, which a server that took the lock late
           // (its acquisition and holder record still queued) must run too
};

// A lock's clock frozen at one reading, set by each job from its step's reading:
// every server is given the same value and judged at the same instant, and a
// job that runs late still uses its own step's reading.
class FrozenClock final : public Clock {
 public:
  void set(util::Micros reading) { m_reading = reading; }
  util::Micros now() override { return m_reading; }

 private:
  util::Micros m_reading{0};
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
  std::optional<util::Micros> deadline;
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

using Channels = std::vector<std::shared_ptr<QuorumChannel>>;

// A channel per server, each with its worker started (signals blocked in it).
Channels start_channels(std::vector<QuorumServer> servers, const std::string& key);

// Waits until no server has a job queued or running, `timeout` at most; true if none has.
bool wait_idle(const Channels& channels, util::Micros timeout);

// Stops every worker: joined if idle, else left behind to finish on its own.
void stop_channels(const Channels& channels);

// True if the server has no job queued or running.
bool is_idle(QuorumChannel& channel);

// Queues `job` for the channel's worker, or runs it here if it has none.
// False (and nothing queued) if the server still owes two earlier replies,
// unless `backlog` exempts the job.
bool post(QuorumChannel& channel, std::function<void(QuorumChannel&)> job,
          Backlog backlog = Backlog::capped);

// The replies to one step, so far or in the end.
template <typename T>
struct Replies {
  std::vector<std::optional<T>> values;            // the servers that answered
  std::vector<std::optional<util::Error>> errors;  // those that failed, or gave no reply in time
  std::size_t pending = 0;                         // involved servers yet to reply
  std::size_t answered = 0;                        // values
  std::size_t failed = 0;                          // errors
};

// What the replies so far say of a step, and so how much longer ask() waits.
enum class Decision {
  open,              // not decided yet: wait for more replies
  done_after_grace,  // decided, not a success (lost, or enough answered to know): the
                     // servers yet to reply get a moment more (`grace`), so that counts
                     // and views are complete, then nobody is waited for
  done_now,          // decided, a success: nobody is waited for any longer
};

// Runs `step` on every `involved` server, each on its own queue and worker
// thread, its exchanges bounded by `deadline`. Waits until `enough` says the
// replies so far decide the step, every involved server has replied, or
// `wait_until` (monotonic) passes; a server yet to reply then shows an
// unavailable error. A server that still owes replies to two earlier steps is
// not asked again (unless `backlog` exempts the step): it counts as not
// answering, and its queue does not grow while it is stopped.
template <typename T>
Replies<T> ask(const Channels& channels, std::function<T(QuorumChannel&)> step,
               const std::function<Decision(const Replies<T>&)>& enough,
               std::optional<util::Micros> deadline, const std::vector<bool>& involved,
               std::optional<util::Micros> wait_until = std::nullopt,
               std::optional<util::Micros> grace = std::nullopt,
               Backlog backlog = Backlog::capped) {
  using util::Error;
  using util::ErrorKind;
  using util::Micros;
  // Shared with the jobs: one may reply after this call returned.
  struct Shared {
    std::mutex mutex;
    std::condition_variable replied;
    Replies<T> replies;
    std::vector<bool> waiting;
  };
  const std::size_t n = channels.size();
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
    const bool queued = post(
        *channels[i],
        [shared, shared_step, i, deadline](QuorumChannel& channel) {
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
        },
        backlog);
    if (!queued) {
      std::lock_guard<std::mutex> guard(shared->mutex);
      shared->replies.errors[i] =
          Error(ErrorKind::unavailable, channels[i]->spec.name,
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
    decision = all_in() ? Decision::done_now : enough(shared->replies);
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
  if (decision != Decision::done_now) {
    const Micros grace_end = util::mono_now() + grace.value_or(k_straggler_grace);
    wait(all_in, wait_until ? std::min(*wait_until, grace_end) : grace_end);
  }
  Replies<T> out = shared->replies;
  for (std::size_t i = 0; i < n; ++i) {
    if (shared->waiting[i]) {
      out.errors[i] = Error(ErrorKind::unavailable, channels[i]->spec.name,
                            "no reply yet (the others decided the step)");
    }
  }
  return out;
}

}  // namespace nxlock::lock::detail
