// FileWatcher: waits for one bucket file of the embedded store to be replaced or removed.
#pragma once

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
  FileWatcher(int stripe_fd, std::string name, const std::string& stripe_path);

  WaitResult wait(util::Micros timeout, int interrupt_fd) override;

 private:
  // Reads every pending event; true if one concerns our bucket (or we may have
  // missed one). If the watch itself is gone (the directory was removed), later
  // waits poll.
  bool drain_events();

  std::string m_name;        // the bucket file's name in the watched stripe directory
  std::string m_path;        // the stripe directory, for messages
  util::UniqueFd m_inotify;  // invalid: no inotify, poll in slices
};

}  // namespace nxlock::store
