// QuorumLock: the documented lock on N independent servers, held by a majority within a
// validity window (the Redlock idea over the SETNX page's steps).
//
// Every server gets the same value, computed once per round from one reading of
// the caller's clock (servers' TIME readings cannot be combined into one value).
// A round contacts every server at once, one thread each. The lock is held when
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

// The majority of n servers: n/2 + 1.
std::size_t majority_of(std::size_t servers);

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
  Verdict release_after(std::string_view value, util::Micros not_before,
                        std::string& kept_value) override;
  Verdict renew(std::string_view value, std::int64_t ttl, std::string& new_value) override;
  void record_holder(Holder holder) override;
  std::optional<Holder> holder_of(std::string_view value) override;
  bool force_release(std::optional<std::string>& holder_problem) override;
  Status status() override;
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override;
  util::Micros validity_margin(std::int64_t ttl) const override { return drift_margin(ttl); }
  std::vector<ServerView> server_views() const override { return m_views; }

  // One round: the steps on every server at once; undone everywhere unless held.
  QuorumRound try_round(std::int64_t ttl);

 private:
  struct Server;
  class FrozenClock;
  class Workers;

  // Runs `step` on every server at once (this thread takes the first) and
  // collects each one's util::Error instead of throwing it.
  // The server's lock, connecting first if it is not yet (throws util::Error).
  Lock& open(Server& server);
  // Bounds the exchanges of every open server (and those opened later) by `deadline`.
  void apply_deadline(std::optional<util::Micros> deadline);
  void on_every_server(const std::function<void(Server&, std::size_t)>& step,
                       std::vector<std::optional<util::Error>>& errors);
  // Gives a round that took a majority its token, the highest of the acquiring
  // servers' own, and raises the counter to it on the acquiring servers below it.
  // True if a majority's counters hold it for us before the window ends.
  bool raise_fences(QuorumRound& round, const std::vector<bool>& acquired, std::int64_t ttl);
  // Compare-and-deletes `value` on every server but those `keep` marks.
  void undo(const std::string& value, const std::vector<bool>& keep);
  // The verdict of a majority, or throws: unavailable when the servers that did
  // not answer could change it, the first other error as it is.
  Verdict tally(const std::vector<std::optional<Verdict>>& verdicts,
                const std::vector<std::optional<util::Error>>& errors, const char* doing);
  // Applies `step` to `value`, then to the values we wrote before (a renewal
  // whose reply was lost may have left one of them there) until one is done.
  Verdict on_any_of_ours(std::string_view value,
                         const std::function<Verdict(Lock&, std::string_view)>& step,
                         Server& server);
  // on_any_of_ours() on every server at once, then tally(): the shape of
  // release, release_after and renew. `verdicts` receives each server's verdict.
  Verdict on_every_holder(std::string_view value,
                          const std::function<Verdict(Lock&, std::string_view)>& step,
                          const char* doing, std::vector<std::optional<Verdict>>& verdicts);
  util::Error no_majority(std::size_t answered,
                          const std::vector<std::optional<util::Error>>& errors) const;

  std::vector<std::unique_ptr<Server>> m_servers;
  Clock& m_clock;
  std::unique_ptr<FrozenClock> m_frozen;  // one reading per round, shared by every server
  std::string m_key;
  std::optional<util::Micros> m_deadline;  // set_deadline()'s
  std::optional<util::Micros> m_applied;   // what the servers have now (a round may cap it)
  std::vector<std::string> m_written;      // values we wrote this invocation, oldest first
  std::int64_t m_fence = 0;                // our acquisition's token
  std::vector<ServerView> m_views;
  std::unique_ptr<Workers> m_workers;  // last: stopped before the servers they work on go
};

}  // namespace nxlock::lock
