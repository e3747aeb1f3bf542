// The watches of a quorum's servers, waited on all at once: a waiter of
// QuorumLock::acquire wakes at the first server that sees the key change.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "lock/quorum/quorum_fanout.hpp"
#include "store/store.hpp"
#include "util/time.hpp"

namespace nxlock::lock::detail {

class QuorumWatches {
 public:
  explicit QuorumWatches(const Channels& channels)
      : m_channels(channels), m_watchers(channels.size()) {}

  // Arms a watch on every server `answered` marks that has none (again, where
  // one was dropped), each exchange bounded by `deadline`; true if one was armed.
  bool arm(const std::vector<bool>& answered, std::optional<util::Micros> deadline);

  // Waits on the watches of the servers whose workers are idle (a watcher
  // reads its store's deadline, which a job still running there may be
  // setting), on `interrupt_fd` and on `timeout`: one thread per watch, all
  // stopped when the first sees a change. A watch that fails is dropped, to be
  // armed again by the next arm().
  store::WaitResult wait(util::Micros timeout, int interrupt_fd);

 private:
  const Channels& m_channels;
  std::vector<std::shared_ptr<store::Watcher>> m_watchers;  // null: none armed
};

}  // namespace nxlock::lock::detail
