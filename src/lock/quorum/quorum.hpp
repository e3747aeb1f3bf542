// QuorumLock: the documented lock on N independent servers, held by a majority within a
// validity window (the Redlock idea over the SETNX page's steps).
//
// Every server gets the same value, computed once per round from one reading of
// the caller's clock (servers' TIME readings cannot be combined into one value).
// A round contacts every server at once, each on its own worker thread and queue,
// and is decided as soon as the replies so far decide it: a server that does not
// answer delays neither this step nor the next on the others. The lock is held when
// a majority acquired it and the round ended while the value written at its start
// is still valid by every clock within the drift margin; anything less is undone
// on every server (compare-and-delete of our value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lock/clock.hpp"
#include "lock/lock.hpp"
#include "store/store.hpp"
#include "util/error.hpp"

namespace nxlock::lock {

namespace detail {
struct QuorumChannel;  // one server's connection, lock and worker (quorum_fanout.hpp)
}

// The majority of n servers: n/2 + 1.
std::size_t majority_of(std::size_t servers);

// The quorum's token among the tokens `fences` of `servers` servers: the highest
// that a majority of them carry (every quorum acquisition leaves its token on a
// majority; a server that took the lock after the majority had it issued a
// higher one of its own, which no quorum holder was given), or the lowest of
// them when fewer answered. nullopt when there is none.
std::optional<std::int64_t> quorum_token(std::vector<std::int64_t> fences, std::size_t servers);

// How much sooner than ttl a lock may end as another client's clock sees it:
// 2 ms plus 1% of the ttl (clock drift, and clock offsets that NTP keeps small).
// The second of granularity of the value is covered by the value itself: it is
// now + ttl + 1, held at least ttl + 1 seconds after the reading it came from.
util::Micros drift_margin(std::int64_t ttl);

// The monotonic instant until which a lock whose value was computed from a clock
// reading taken at `started` (monotonic) is held by every client within the margin.
util::Micros validity_end(util::Micros started, std::int64_t ttl);

// Whether a round that got `acquired` of `servers` and ended at `ended` holds the
// lock: a majority, and still inside the validity window.
bool quorum_holds(std::size_t acquired, std::size_t servers, util::Micros started,
                  util::Micros ended, std::int64_t ttl);

// One server of a quorum: its name for messages, and how to connect to it.
struct QuorumServer {
  std::string name;  // the URL, password redacted
  // Opens the store (connects); throws util::Error. Called again after a failure.
  std::function<std::unique_ptr<store::Store>()> open;
};

// What one server said in one round: the attempt, or the error instead.
// Kept per server so that later per-server facts (fencing tokens) can be combined.
struct ServerAttempt {
  std::optional<Attempt> attempt;
  std::optional<util::Error> error;
};

// One round of the documented steps on every server.
struct QuorumRound {
  bool acquired = false;
  std::string value;              // the value written everywhere
  std::int64_t now_seconds = 0;   // the clock reading it came from
  util::Micros started{0};        // monotonic, just before that reading
  util::Micros ended{0};          // monotonic, after the last reply
  std::size_t acquired_on = 0;    // servers that took it
  std::size_t answered = 0;       // servers that answered at all
  std::int64_t held_until = 0;    // not acquired: the expiry most busy servers report
  std::size_t held_on = 0;        // not acquired: how many servers report that one
  std::int64_t first_expiry = 0;  // not acquired: the earliest expiry a busy server reports
  std::int64_t fence = 0;         // acquired: the quorum's fencing token (see raise_fences)
  std::size_t fenced_on = 0;      // acquired: servers whose counter holds it for us
  std::vector<ServerAttempt> servers;
};

class QuorumLock final : public Lockable {
 public:
  // `clock` decides every expiry (the caller's clock: see above). `key` is the
  // full store key. At least two servers.
  QuorumLock(std::vector<QuorumServer> servers, Clock& clock, std::string key);
  ~QuorumLock() override;

  const std::string& key() const override { return m_key; }
  // The token of the acquisition this lock made (0 before one): above the token of
  // every earlier quorum acquisition of the key, as raise_fences() explains.
  std::int64_t fence() const override { return m_fence; }
  AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) override;
  Verdict release(std::string_view value) override;
  Kept release_after(std::string_view value, util::Micros not_before) override;
  RenewalPlan plan_renewal(std::string_view value, std::int64_t ttl) override;
  Renewed renew(std::string_view value, const RenewalPlan& plan) override;
  using Lockable::renew;
  void record_holder(Holder holder) override;
  // Each server's token of the take is its own, and not known here: the hold
  // is released by its value alone, as `unlock KEY VALUE` releases it.
  void resume(std::string_view, std::int64_t, std::int64_t) override {}
  std::optional<Holder> holder_of(std::string_view value) override;
  Removal force_release() override;
  Status status() override;
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override;
  util::Micros validity_margin(std::int64_t ttl) const override { return drift_margin(ttl); }
  // Its takers do not queue: each server's own line would hold a different
  // set of them, and no majority's count is an arrival order.
  std::string waiters_uncounted() const override {
    return "with a quorum of servers: its takers keep no line of waiters; use one server or etcd";
  }

  // One round: the steps on every server at once; undone everywhere unless held.
  QuorumRound try_round(std::int64_t ttl);

  // Waits until no server has a job queued or running, `timeout` at most; true
  // if none has. A step may return before a server that did not answer in time
  // has run its part: this is for tests that then read the servers directly.
  bool wait_for_workers(util::Micros timeout);

 private:
  // Gives a round that took a majority its token, the highest of the acquiring
  // servers' own, and raises the counter to it on the acquiring servers below it.
  // True if a majority's counters hold it for us before the window ends.
  bool raise_fences(QuorumRound& round, const std::vector<bool>& acquired, std::int64_t ttl);
  // Compare-and-deletes `value` on every server but those `keep` marks, under
  // the token our acquisition took there; where it took none, only unless
  // `under_token_only` (an acquisition's round: nothing there is ours).
  void undo(const std::string& value, const std::vector<bool>& keep, bool under_token_only);
  // The verdict of a majority, or throws: unavailable when the servers that did
  // not answer could change it, the first other error as it is.
  Verdict tally(const std::vector<std::optional<Verdict>>& verdicts,
                const std::vector<std::optional<util::Error>>& errors, const char* doing);
  // On every server at once: applies `step` to `value`, then to the values we
  // wrote before (a renewal whose reply was lost may have left one of them
  // there) until one is done; then tally(): the shape of release, release_after
  // and renew. `verdicts` receives each server's verdict (none: no reply).
  // `reading` is the caller's clock, given to every server's Lock. A step that
  // lets go (`letting_go`: release, release_after) is for every server that
  // holds our value, one that took it after the majority did included: it is
  // queued there behind that server's late acquisition whatever its backlog,
  // and once a majority did it the others get until the deadline
  // (set_deadline; k_best_effort_patience without one) to do it too, where
  // this lock made the acquisition.
  Verdict on_every_holder(std::string_view value, util::Micros reading,
                          std::function<Verdict(Lock&, std::string_view)> step, const char* doing,
                          std::vector<std::optional<Verdict>>& verdicts, bool letting_go);
  util::Error no_majority(std::size_t answered,
                          const std::vector<std::optional<util::Error>>& errors) const;
  std::vector<bool> everyone() const { return std::vector<bool>(m_channels.size(), true); }

  // Shared with the workers: a step a stopped server holds up may end after this lock.
  // Steps run on them through detail::ask() (quorum_fanout.hpp).
  std::vector<std::shared_ptr<detail::QuorumChannel>> m_channels;
  Clock& m_clock;
  std::string m_key;
  std::optional<util::Micros> m_deadline;  // set_deadline()'s
  std::vector<std::string> m_written;      // values we wrote this invocation, oldest first
  std::int64_t m_fence = 0;                // our acquisition's token
};

}  // namespace nxlock::lock
