// A key's bucket in the embedded store: where it lives (STORE/data/XY/<name>), read
// without a lock, and changed in one transaction under its stripe's flock
// (docs/STORE-FORMAT.md, "Operations" and "Why it is atomic").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/file/record.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

class StoreDirectory;

// What a write does to its key, decided after seeing the current entry.
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
  bool owned = false;                 // put: this process is recorded as the lock's owner
};

// A key's stripe directory (STORE/data/XY) and where its bucket lives in it.
struct Stripe {
  record::Bucket bucket;
  std::string path;         // STORE/data/XY, for messages
  std::string record_path;  // STORE/data/XY/<bucket name>, for messages
  util::UniqueFd fd;        // opened without following symlinks; invalid if it does not exist
  std::string key;          // the key asked for, for messages; empty if none
};

class Buckets {
 public:
  explicit Buckets(StoreDirectory& directory) : m_directory(directory) {}

  // Opens key's stripe directory; with `create`, makes it (and data/) if missing.
  Stripe open(std::string_view key, bool create);

  // The entries of key's bucket (none if it does not exist), read without a
  // lock: every write is a rename, so this sees a whole old or new bucket.
  std::vector<record::Entry> read(std::string_view key);

  using Decide = std::function<Change(const record::Entry* current)>;
  // One atomic read-decide-write of key's bucket under its stripe lock. `decide`
  // sees the current entry (nullptr if absent). `may_insert` false lets an
  // operation on an absent key finish without creating directories. An owning
  // put (a new token) also sweeps the stripe (sweep.hpp).
  void update(std::string_view key, bool may_insert, const Decide& decide);

  using DecidePair = std::function<std::pair<Change, Change>(const record::Entry* first,
                                                             const record::Entry* second)>;
  // update() of two keys at once, under both stripe locks, taken in stripe
  // order (so two such transactions never wait on each other in a circle).
  // The buckets are replaced one after the other: `first`'s first unless
  // `second_first`, so the caller chooses what a crash between them leaves.
  void update_pair(std::string_view first, std::string_view second, bool second_first,
                   const DecidePair& decide);

  // The buckets of two keys as one step: read under both stripe locks, shared
  // (a reader needs no write access), taken in update_pair's order.
  std::pair<std::vector<record::Entry>, std::vector<record::Entry>> read_pair(
      std::string_view first, std::string_view second);

  // The stripe's bucket, whose stripe lock the caller holds (or which it reads
  // whole). Throws util::Error(data) for a corrupt record, naming the file, the
  // key and what removing the file would drop.
  std::vector<record::Entry> load(const Stripe& stripe);
  // Writes `entries` as the stripe's bucket (removes it when empty).
  void save(const Stripe& stripe, const std::vector<record::Entry>& entries);

 private:
  void write_record(const Stripe& stripe, std::string_view bytes);
  void remove_record(const Stripe& stripe);

  StoreDirectory& m_directory;
};

}  // namespace nxlock::store
