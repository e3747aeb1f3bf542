// FileStore: the embedded store, a directory of checksummed per-bucket record files
// serialized by kernel flocks (see docs/STORE-FORMAT.md).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "store/file/record.hpp"
#include "store/store.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

class FileWatcher;

// The queue is private: the lock layer reaches it through queue().
class FileStore final : public Store, private WaitersQueue {
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
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override;

 private:
  // The waiters' queue (WaitersQueue).
  QueuedSet set_if_absent(std::string_view key, std::string_view value, std::string_view counter,
                          std::string_view queue, std::string_view ticket, bool waiting,
                          util::Micros lease) override;
  bool compare_and_delete(std::string_view key, std::string_view expected, const Fence& fence,
                          std::string_view queue) override;
  void leave(std::string_view key, std::string_view queue, std::string_view ticket) override;
  std::unique_ptr<Watcher> watch(std::string_view key, std::string ticket) override;

  // What a mutation does to its key, decided after seeing the current entry.
  struct Change {
    enum class Kind { keep, put, erase };
    Change() = default;
    Change(Kind k, std::string_view v) : kind(k), value(v) {}
    Kind kind = Kind::keep;
    std::string_view value;  // the new value, for put
    // put: the lock's token and owner stay (a compare-and-set), else they are
    // replaced by `fence` (none: a plain write, which no owner made).
    bool keep_meta = false;
    std::optional<std::int64_t> fence;
    std::optional<std::int64_t> until;  // put: details beside the lock, until it expires
    bool owned = false;  // put: this process is recorded as the lock's owner
  };
  // A plain write of the details nxlock keeps beside a lock this process holds
  // (run-locked's holder record names the lock's value): tagged with the
  // lock's token and expiry, so that they go with the lock once it expired
  // abandoned. Nothing else is ever tagged.
  Change tagged_put(std::string_view value);
  // Remembers a lock value this process wrote with its token (bounded).
  void remember_own(std::string_view value, std::int64_t fence);
  using Decide = std::function<Change(const record::Entry* current)>;

  // A key's stripe directory (STORE/data/XY) and where its bucket lives in it.
  struct Stripe {
    record::Bucket bucket;
    std::string path;         // STORE/data/XY, for messages
    std::string record_path;  // STORE/data/XY/<bucket name>, for messages
    util::UniqueFd fd;        // opened without following symlinks; invalid if it does not exist
  };

  // compare_and_set() with a fence: the owner's renewal, if the lock's entry
  // still holds its token.
  bool renew(std::string_view key, std::string_view expected, std::string_view value,
             std::int64_t token);
  // GET of an entry of the store itself.
  std::optional<std::string> get_entry_value(std::string_view key);
  // The token of the lock whose per-lock counter (as Redis names it) is `counter`.
  std::optional<std::int64_t> token_of_counter(std::string_view counter);
  // Moves the token of the lock `lock_key` from `expected` to `raised` (not
  // lower), and the store's counter up to it; false if the lock's token is not
  // `expected` (another acquisition came first).
  bool raise_token(std::string_view lock_key, std::string_view expected, std::string_view raised);
  // Opens the store directory (with `create`, makes it). False if it does not exist.
  bool open_root(bool create);
  void check_marker();
  bool directory_is_empty();
  void write_marker();
  // The data directory's fd, opened (and with `create`, made) on first need; -1 if absent.
  int data_dir(bool create);
  // Opens key's stripe directory; with `create`, makes it (and data/) if missing.
  Stripe open_stripe(std::string_view key, bool create);
  // One atomic read-decide-write of key's bucket under its stripe lock. `decide`
  // sees the current value (nullptr if absent). `may_insert` false lets an
  // operation on an absent key finish without creating directories.
  void mutate(std::string_view key, bool may_insert, const Decide& decide);
  // The next fencing token, from the store-wide counter (locked only for this
  // call, after the caller's stripe lock); above `at_least` too.
  std::int64_t issue_fence(std::int64_t at_least);
  // Removes, from the stripe whose lock the caller holds, a few records of
  // other keys that only hold expired locks nobody alive owns (and the
  // details written beside them): a lock nobody releases does not stay forever.
  void sweep_stripe(const Stripe& stripe);
  void lock_stripe(const Stripe& stripe);
  std::vector<record::Entry> load(const Stripe& stripe);
  // Writes `entries` as the stripe's bucket (removes it when empty).
  void save(const Stripe& stripe, const std::vector<record::Entry>& entries);
  static bool apply(std::vector<record::Entry>& entries, std::string_view key,
                    const Change& change);
  // Whether the store directory exists yet (it is made by the first write).
  bool ensure_root(bool create);
  void write_record(const Stripe& stripe, std::string_view bytes);

  // The waiters' queue: an entry of the store like any other (`queue`), one
  // line per waiter, "TICKET ARRIVAL LEASE_UNTIL" (microseconds, this host's
  // clock), in arrival order. Each queued waiter has a FIFO, STORE/wait/TICKET,
  // that it holds open while it waits: a release writes a byte into the first
  // live waiter's, and a FIFO that nobody holds open any more (ENXIO) is a
  // waiter that died, passed over at once.
  int wait_dir(bool create);  // STORE/wait, -1 if absent
  std::unique_ptr<FileWatcher> make_watcher(std::string_view key);
  util::UniqueFd make_fifo(const std::string& ticket);
  void remove_fifo(const std::string& ticket);
  // Wakes the first live waiter of `queue`, dropping the dead ones it meets.
  void wake_first(std::string_view queue);
  void drop_from_queue(std::string_view queue, const std::vector<std::string>& tickets);
  // Removes `ticket`'s FIFO if nobody holds it open (its waiter died). True if
  // it is gone.
  bool reap_fifo(const std::string& ticket);
  // The queue a SETNX took the lock from, left at the next write (mutate(),
  // mutate_pair()) or close: see the queued set_if_absent().
  struct Leaving {
    std::string queue;
    std::string ticket;
  };
  void leave_queue_now();  // best effort: an entry not dropped lapses with its lease
  void remove_record(const Stripe& stripe);

  std::string m_path;
  Options m_options;
  util::UniqueFd m_root;      // O_DIRECTORY fd of the store; everything else is openat() from it
  util::UniqueFd m_data;      // STORE/data, once it exists
  util::UniqueFd m_wait;      // STORE/wait, once it exists
  // One inotify instance for every watch of this store, lent to one watcher at
  // a time, closed only with the store: see FileWatcher (closing one costs an
  // SRCU grace period, which must not fall between an acquisition and its job).
  util::UniqueFd m_inotify;
  bool m_inotify_lent = false;
  std::optional<Leaving> m_leaving;
  std::vector<std::pair<std::string, std::int64_t>> m_own_values;  // lock value, its token
  mode_t m_file_mode = 0600;  // permission bits for new files: the store directory's, minus x
  mode_t m_dir_mode = 0700;   // permission bits (and setgid) for new directories
  bool m_marker_v1 = false;   // a format 1 store, not yet marked 2 (see issue_fence)
};

}  // namespace nxlock::store
