// FileStore: the embedded store, a directory of checksummed per-bucket record files
// serialized by kernel flocks (see docs/STORE-FORMAT.md).
#pragma once

#include <sys/types.h>

#include <functional>

#include "store/file/record.hpp"
#include "store/store.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

class FileStore final : public Store {
 public:
  struct Options {
    bool create = true;          // create the store directory (0700) if it is missing
    bool durable = false;        // fsync records and directories (power-loss durability)
    bool require_owner = false;  // refuse a directory owned by another user (default store)
  };

  // Opens (or creates) the store at `path`, an absolute directory path.
  // Throws util::Error: data (65) if the path holds something that is not an
  // nxlock store, permission (77) if it cannot be accessed.
  FileStore(std::string path, Options options);
  ~FileStore() override;

  std::string describe() const override;  // the path, escaped
  bool set_if_absent(std::string_view key, std::string_view value) override;
  std::optional<std::string> get(std::string_view key) override;
  std::optional<std::string> get_and_set(std::string_view key, std::string_view value) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected) override;
  bool compare_and_set(std::string_view key, std::string_view expected,
                       std::string_view value) override;
  std::optional<std::int64_t> set_if_absent_fenced(std::string_view key, std::string_view value,
                                                   std::string_view counter) override;
  FencedSwap get_and_set_fenced(std::string_view key, std::string_view value,
                                std::string_view counter, std::int64_t now_seconds) override;
  bool compare_and_set_fenced(std::string_view key, std::string_view expected,
                              std::string_view value, std::string_view counter,
                              std::int64_t fence) override;
  bool compare_and_delete_fenced(std::string_view key, std::string_view expected,
                                 std::string_view counter, std::int64_t fence) override;
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override;

 private:
  // What a mutation does to its key, decided after seeing the current value.
  struct Change {
    enum class Kind { keep, put, erase };
    Kind kind = Kind::keep;
    std::string_view value;  // the new value, for put
  };
  using Decide = std::function<Change(const std::string* current)>;
  struct Changes {
    Change key;
    Change counter;
  };
  using DecidePair = std::function<Changes(const std::string* current, const std::string* counter)>;

  // A key's stripe directory (STORE/data/XY) and where its bucket lives in it.
  struct Stripe {
    record::Bucket bucket;
    std::string path;         // STORE/data/XY, for messages
    std::string record_path;  // STORE/data/XY/<bucket name>, for messages
    util::UniqueFd fd;        // opened without following symlinks; invalid if it does not exist
  };

  void open_root();
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
  // mutate() for a lock key and its fencing counter as one atomic step: both
  // stripes locked, in name order (or once, when they are one stripe), so no
  // writer of either key comes in between, and no two such steps deadlock.
  void mutate_pair(std::string_view key, std::string_view counter, bool may_insert,
                   const DecidePair& decide);
  void lock_stripe(const Stripe& stripe);
  std::vector<record::Entry> load(const Stripe& stripe);
  // Writes `entries` as the stripe's bucket (removes it when empty).
  void save(const Stripe& stripe, const std::vector<record::Entry>& entries);
  static bool apply(std::vector<record::Entry>& entries, std::string_view key,
                    const Change& change);
  void write_record(const Stripe& stripe, std::string_view bytes);
  void remove_record(const Stripe& stripe);

  std::string m_path;
  Options m_options;
  util::UniqueFd m_root;      // O_DIRECTORY fd of the store; everything else is openat() from it
  util::UniqueFd m_data;      // STORE/data, once it exists
  mode_t m_file_mode = 0600;  // permission bits for new files: the store directory's, minus x
  mode_t m_dir_mode = 0700;   // permission bits (and setgid) for new directories
};

}  // namespace nxlock::store
