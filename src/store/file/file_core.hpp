// FileCore: what the embedded store's parts share (its steps, its waiters' queue, its
// leases, its listing): the directory, its buckets, the token counter and the watches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "store/file/bucket.hpp"
#include "store/file/store_directory.hpp"
#include "store/file/watcher.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

class FileCore {
 public:
  // `record_owner`: FileStore::Options::record_owner.
  FileCore(std::string path, const StoreDirectory::Options& options, bool record_owner);

  StoreDirectory& directory() { return m_directory; }
  const StoreDirectory& directory() const { return m_directory; }
  Buckets& buckets() { return m_buckets; }
  // Whether the locks this process takes and renews record it as their owner.
  bool record_owner() const { return m_record_owner; }

  // The next fencing token, from the store-wide counter (locked only for this
  // call, after the caller's stripe lock); above `at_least` too.
  std::int64_t issue_fence(std::int64_t at_least);

  // A watch on key's bucket. A queued watch (FileWatcher::only_for) is woken
  // through a FIFO that `make_fifo` makes and `remove_fifo` removes (the queue's).
  std::unique_ptr<FileWatcher> make_watcher(std::string_view key, FileWatcher::MakeFifo make_fifo,
                                            FileWatcher::RemoveFifo remove_fifo);

 private:
  StoreDirectory m_directory;
  Buckets m_buckets;
  bool m_record_owner = false;
  // One inotify instance for every watch of this store, lent to one watcher at
  // a time, closed only with the store: see FileWatcher (closing one costs an
  // SRCU grace period, which must not fall between an acquisition and its job).
  util::UniqueFd m_inotify;
  bool m_inotify_lent = false;
};

}  // namespace nxlock::store
