// FileStore: the embedded store, a directory of checksummed per-bucket record files
// serialized by kernel flocks (see docs/STORE-FORMAT.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/file/bucket.hpp"
#include "store/file/file_core.hpp"
#include "store/file/file_leases.hpp"
#include "store/file/file_listing.hpp"
#include "store/file/file_queue.hpp"
#include "store/store.hpp"

namespace nxlock::store {

// The steps are FileStore's own; the waiters' queue, the shared leases and
// the listing are parts of it, each with only what it needs of the core.
class FileStore final : public Store {
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
  FileStore(std::string path, const Options& options);
  ~FileStore() override;

  std::string describe() const override;  // the path, escaped
  SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                            std::optional<std::string_view> counter, StepPolicy policy) override;
  std::optional<std::string> get(std::string_view key) override;
  Swap get_and_set(std::string_view key, std::string_view value, std::optional<Takeover> takeover,
                   StepPolicy policy) override;
  void set(std::string_view key, std::string_view value, StepPolicy policy) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence, StepPolicy policy) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence, StepPolicy policy) override;
  WaitersQueue* queue() override { return &m_queue; }
  SharedLeases* shared() override { return &m_leases; }
  LockListing* listing() override { return &m_listing; }
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override;

 private:
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

  FileCore m_core;
  FileQueue m_queue;
  FileLeases m_leases;
  FileListing m_listing;
  std::vector<std::pair<std::string, std::int64_t>> m_own_values;  // lock value, its token
};

}  // namespace nxlock::store
