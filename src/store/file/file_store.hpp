// FileStore: the embedded store, a directory of checksummed per-bucket record files
// serialized by kernel flocks (see docs/STORE-FORMAT.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/file/bucket.hpp"
#include "store/file/record.hpp"
#include "store/file/store_directory.hpp"
#include "store/lock_listing.hpp"
#include "store/store.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

class FileWatcher;

// The queue, the shared leases and the listing are private: the lock layer
// reaches them through queue(), shared() and listing().
class FileStore final : public Store,
                        private WaitersQueue,
                        private SharedLeases,
                        private LockListing {
 public:
  struct Options {
    // Create the store directory at the first write if it is missing (the
    // default store 0700, an explicit path as the umask says); without it, a
    // missing store is an error (69) at once.
    bool create = true;
    bool durable = false;        // fsync records and directories (power-loss durability)
    bool require_owner = false;  // refuse a directory owned by another user (default store)
    // Record this process as the owner of the locks it takes and renews: it
    // renews them while it lives (run-locked), so its liveness keeps them
    // held against a caller's clock. Without it (lock, --no-renew), only the
    // timestamp decides.
    bool record_owner = false;
    // Appended to a failure to create the store directory: where its path came
    // from and what to do instead (the default store's, default_store_hint()).
    std::string create_hint;
  };

  // Opens (or creates) the store at `path`, an absolute directory path.
  // Throws util::Error: data (65) if the path holds something that is not an
  // nxlock store, permission (77) if it cannot be accessed.
  FileStore(std::string path, Options options);
  ~FileStore() override;

  std::string describe() const override;  // the path, escaped
  SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                            std::optional<std::string_view> counter = {}) override;
  std::optional<std::string> get(std::string_view key) override;
  Swap get_and_set(std::string_view key, std::string_view value,
                   std::optional<Takeover> takeover = {}) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence = {}) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence = {}) override;
  WaitersQueue* queue() override { return this; }
  SharedLeases* shared() override { return this; }
  LockListing* listing() override { return this; }
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override;

 private:
  // The waiters' queue (WaitersQueue), in waiters_queue.cpp.
  QueuedSet take_or_queue(std::string_view key, std::string_view value, std::string_view counter,
                          std::string_view queue, std::string_view ticket, bool waiting,
                          util::Micros lease) override;
  bool release_and_wake(std::string_view key, std::string_view expected, const Fence& fence,
                        std::string_view queue) override;
  void leave(std::string_view key, std::string_view queue, std::string_view ticket) override;
  std::unique_ptr<Watcher> watch_turn(std::string_view key, std::string ticket) override;

  // The shared leases (SharedLeases), in shared_leases.cpp: the lease set is
  // an entry beside the lock, changed with the lock's entry in one transaction
  // over both buckets (Buckets::update_pair).
  Take take(const Keys& keys, const TakeRequest& request) override;
  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry) override;
  bool release(const Keys& keys, const LeaseMatch& lease) override;
  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override;
  LeaseSet read(const Keys& keys) override;
  // take()'s lease step alone, without the queue.
  Take take_lease(const Keys& keys, const TakeRequest& request);
  // LockListing (listing.cpp): every bucket read once, without a lock (each
  // is replaced whole by rename, so a read sees an old or a new bucket).
  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override;
  // The tickets of a queue entry's waiters that still hold a lease, in arrival
  // order (waiters_queue.cpp).
  static std::vector<std::string> live_tickets(const std::string& queue_text);

  // A plain write of the details nxlock keeps beside a lock this process holds
  // (run-locked's holder record names the lock's value): tagged with the
  // lock's token and expiry, so that they go with the lock once it expired
  // abandoned. Nothing else is ever tagged.
  Change tagged_put(std::string_view value);
  // Remembers a lock value this process wrote with its token (bounded).
  void remember_own(std::string_view value, std::int64_t fence);

  // compare_and_set() with a fence: the owner's renewal, if the lock's entry
  // still holds its token.
  bool renew_owned(std::string_view key, std::string_view expected, std::string_view value,
                   std::int64_t token);
  // GET of an entry of the store itself.
  std::optional<std::string> get_entry_value(std::string_view key);
  // The token of the lock whose per-lock counter (as Redis names it) is `counter`.
  std::optional<std::int64_t> token_of_counter(std::string_view counter);
  // Moves the token of the lock `lock_key` from `expected` to `raised` (not
  // lower), and the store's counter up to it; false if the lock's token is not
  // `expected` (another acquisition came first).
  bool raise_token(std::string_view lock_key, std::string_view expected, std::string_view raised);
  // Buckets::update(), after leaving the queue a SETNX took the lock from.
  void mutate(std::string_view key, bool may_insert, const Buckets::Decide& decide);
  // The next fencing token, from the store-wide counter (locked only for this
  // call, after the caller's stripe lock); above `at_least` too.
  std::int64_t issue_fence(std::int64_t at_least);
  std::unique_ptr<FileWatcher> make_watcher(std::string_view key);

  // The waiters' queue (waiters_queue.cpp): an entry of the store like any
  // other (`queue`), one line per waiter, "TICKET ARRIVAL LEASE_UNTIL BOOT"
  // (microseconds on CLOCK_BOOTTIME), in arrival order. Each queued waiter has
  // a FIFO, STORE/wait/TICKET, that it holds open while it waits: a release
  // writes a byte into the first live waiter's, and a FIFO that nobody holds
  // open any more (ENXIO) is a waiter that died, passed over at once.
  util::UniqueFd make_fifo(const std::string& ticket);
  void remove_fifo(const std::string& ticket);
  // Whether `ticket` may go first: no live waiter in `queue`, or `ticket` is
  // the first; `in_line` says whether a live one (or `ticket`) is in it. An
  // unlocked read: the gate is advice that only the first waiter passes.
  bool may_go_first(std::string_view queue, std::string_view ticket, bool& in_line);
  // The queue's upkeep for a waiter that did not take: drops lapsed entries
  // (`pruned`), and with `waiting` joins `ticket` or renews its lease. Returns
  // the first ticket in line (empty: none).
  std::string keep_in_line(std::string_view queue, std::string_view ticket, bool waiting,
                           util::Micros lease, bool& pruned);
  // Wakes the first live waiter of `queue`, dropping the dead ones it meets.
  void wake_first(std::string_view queue);
  void drop_from_queue(std::string_view queue, const std::vector<std::string>& tickets);
  // Removes `ticket`'s FIFO if nobody holds it open (its waiter died). True if
  // it is gone.
  bool reap_fifo(const std::string& ticket);
  // The queue a SETNX took the lock from, left at the next write (mutate())
  // or close: see take_or_queue().
  struct Leaving {
    std::string queue;
    std::string ticket;
  };
  void leave_queue_now();  // best effort: an entry not dropped lapses with its lease

  Options m_options;
  StoreDirectory m_directory;
  Buckets m_buckets;
  // One inotify instance for every watch of this store, lent to one watcher at
  // a time, closed only with the store: see FileWatcher (closing one costs an
  // SRCU grace period, which must not fall between an acquisition and its job).
  util::UniqueFd m_inotify;
  bool m_inotify_lent = false;
  std::optional<Leaving> m_leaving;
  std::vector<std::pair<std::string, std::int64_t>> m_own_values;  // lock value, its token
};

}  // namespace nxlock::store
