// FileWatcher: waits for one bucket file of the embedded store to be replaced or removed.
#pragma once

#include <functional>
#include <string>

#include "store/store.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

// Watches with inotify on the bucket's stripe directory; without inotify (or past
// the per-user limits), waits by sleeping in short slices so the caller looks again.
//
// The inotify instance may be borrowed (the store's, one per process): closing an
// instance that had a watch waits for an SRCU grace period in the kernel
// (BENCHMARKS.md, "One inotify instance per store"), and a waiter that has just
// taken the lock must not spend that before its job starts. A borrowed instance
// only loses our watch when the watcher goes (inotify_rm_watch does not wait); its
// owner closes it later. Removing the watch and closing at once does not help: the
// close still waits.
class FileWatcher final : public Watcher {
 public:
  // `stripe_fd` is the stripe directory opened without following symlinks; the
  // watcher keeps no reference to it. `name` is the bucket file's name in it.
  // `shared_inotify` is an inotify instance to add our watch to, that nobody
  // else reads while this watcher lives and that outlives it; -1: the watcher
  // makes (and closes) its own. Queued waiters (only_for) are woken through a
  // FIFO of their own that `make_fifo` makes and opens, and `remove_fifo`
  // removes when the watch ends. `done` is called last when the watcher goes.
  using MakeFifo = std::function<util::UniqueFd(const std::string& ticket)>;
  using RemoveFifo = std::function<void(const std::string& ticket)>;
  FileWatcher(int stripe_fd, std::string name, const std::string& stripe_path,
              MakeFifo make_fifo = {}, RemoveFifo remove_fifo = {}, int shared_inotify = -1,
              std::function<void()> done = {});
  ~FileWatcher() override;

  WaitResult wait(util::Micros timeout, int interrupt_fd) override;
  // Queued for `ticket` (WaitersQueue::watch): woken through its FIFO.
  void only_for(std::string ticket);
  void first(bool yes) override { m_first = yes; }
  int fd() const override { return watching() ? m_inotify : -1; }

 private:
  // Reads every pending event; true if one concerns our bucket (or we may have
  // missed one). If the watch itself is gone (the directory was removed), later
  // waits poll.
  bool drain_events();
  bool watching() const { return m_wd >= 0; }

  std::string m_name;              // the bucket file's name in the watched stripe directory
  std::string m_path;              // the stripe directory, for messages
  util::UniqueFd m_owned_inotify;  // our own instance, when none was lent to us
  int m_inotify = -1;              // the instance our watch is in (owned or borrowed)
  int m_wd = -1;                   // our watch; -1: no inotify, poll in slices
  std::function<void()> m_done;
  MakeFifo m_make_fifo;
  RemoveFifo m_remove_fifo;
  std::string m_ticket;   // queued: our ticket, the FIFO's name
  util::UniqueFd m_fifo;  // queued: our wake-up FIFO, open for reading and writing
  bool m_first = true;    // false: behind another waiter, only the FIFO wakes us
};

}  // namespace nxlock::store
