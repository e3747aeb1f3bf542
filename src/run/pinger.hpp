// Pinger: one run's pings to a dead man's switch (healthchecks.io's protocol),
// sent by a helper process so that neither the job's start nor nxlock's exit
// waits on a slow checker longer than the bound.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "run/ping_client.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// Why a process, not a non-blocking socket in supervise()'s loop: name
// resolution (getaddrinfo) blocks, and a checker's name must not hold up the
// job's start (the ping goes out beside it, after it) nor nxlock's exit past
// the bound; a process can be SIGKILLed at the bound, a call cannot. One
// process sends both pings of a run, in order: an end ping that overtook a
// slow start ping would leave the checker waiting for a run that is over.
class Pinger {
 public:
  struct Config {
    PingTarget target;
    util::Micros timeout{2'000'000};  // --ping-timeout: the bound on nxlock's exit
    // A failed ping's one line on stderr (the helper says it; not under -q).
    std::function<void(std::string_view)> note;
  };

  explicit Pinger(Config config);  // makes the run id; sends nothing
  // A helper still waiting for finish() is told nothing: its pipe closes, and
  // it ends without an end ping. Never waits.
  ~Pinger();
  Pinger(const Pinger&) = delete;
  Pinger& operator=(const Pinger&) = delete;

  // The job has started: forks the helper, which sends URL/start within the
  // timeout and then waits for finish(). Never throws: a failed fork is one
  // note, and the end ping then goes alone.
  void started();

  // The run is over (its lock released) with exit status `status`: sends URL
  // (0) or URL/status, after the start ping if one went, and returns within
  // the timeout from now, the helper SIGKILLed if it is not done by then.
  // True if the checker answered 2xx. Never throws.
  bool finish(int status);

  const PingTarget& target() const { return m_config.target; }

 private:
  // Forks the helper; false (and a note) if it cannot.
  bool fork_helper(bool send_start);

  Config m_config;
  std::string m_rid;
  pid_t m_pid = -1;
  util::UniqueFd m_command;  // ours: the end's status and deadline, written once
  util::UniqueFd m_done;     // ours: end of file when the helper is gone
  bool m_finished = false;
};

}  // namespace nxlock::run
