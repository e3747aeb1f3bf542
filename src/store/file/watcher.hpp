// FileWatcher: waits for one bucket file of the embedded store to be replaced or removed.
#pragma once

#include <functional>
#include <string>

#include "store/store.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

// Watches with inotify on the bucket's stripe directory; without inotify (or past
// the per-user limits), waits by sleeping in short slices so the caller looks again.
class FileWatcher final : public Watcher {
 public:
  // `stripe_fd` is the stripe directory opened without following symlinks; the
  // watcher keeps no reference to it. `name` is the bucket file's name in it.
  // Queued waiters (only_for) are woken through a FIFO of their own that
  // `make_fifo` makes and opens, and `remove_fifo` removes when the watch ends.
  using MakeFifo = std::function<util::UniqueFd(const std::string& ticket)>;
  using RemoveFifo = std::function<void(const std::string& ticket)>;
  FileWatcher(int stripe_fd, std::string name, const std::string& stripe_path,
              MakeFifo make_fifo = {}, RemoveFifo remove_fifo = {});
  ~FileWatcher() override;

  WaitResult wait(util::Micros timeout, int interrupt_fd) override;
  void only_for(std::string ticket) override;
  void first(bool yes) override { m_first = yes; }

 private:
  // Reads every pending event; true if one concerns our bucket (or we may have
  // missed one). If the watch itself is gone (the directory was removed), later
  // waits poll.
  bool drain_events();

  std::string m_name;        // the bucket file's name in the watched stripe directory
  std::string m_path;        // the stripe directory, for messages
  util::UniqueFd m_inotify;  // invalid: no inotify, poll in slices
  MakeFifo m_make_fifo;
  RemoveFifo m_remove_fifo;
  std::string m_ticket;   // queued: our ticket, the FIFO's name
  util::UniqueFd m_fifo;  // queued: our wake-up FIFO, open for reading and writing
  bool m_first = true;    // false: behind another waiter, only the FIFO wakes us
};

}  // namespace nxlock::store
