// FileStore: the embedded store, a directory of checksummed per-bucket record files
// serialized by kernel flocks (see docs/STORE-FORMAT.md).
#pragma once

#include <sys/types.h>

#include <functional>

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

  std::string describe() const override { return m_path; }
  bool set_if_absent(std::string_view key, std::string_view value) override;
  std::optional<std::string> get(std::string_view key) override;
  std::optional<std::string> get_and_set(std::string_view key, std::string_view value) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected) override;
  bool compare_and_set(std::string_view key, std::string_view expected,
                       std::string_view value) override;
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  void notify(std::string_view) override {}  // inotify sees every change by itself

 private:
  // What a mutation does to its key, decided after seeing the current value.
  struct Change {
    enum class Kind { keep, put, erase };
    Kind kind = Kind::keep;
    std::string_view value;  // the new value, for put
  };
  using Decide = std::function<Change(const std::string* current)>;

  void open_root();
  void check_marker();
  bool directory_is_empty();
  void write_marker();
  // The data directory's fd, opened (and with `create`, made) on first need; -1 if absent.
  int data_dir(bool create);
  // One atomic read-decide-write of key's bucket under its stripe lock. `decide`
  // sees the current value (nullptr if absent). `may_insert` false lets an
  // operation on an absent key finish without creating directories.
  void mutate(std::string_view key, bool may_insert, const Decide& decide);
  void write_record(int stripe_fd, const std::string& name, const std::string& stripe_path,
                    std::string_view bytes);
  void remove_record(int stripe_fd, const std::string& name, const std::string& stripe_path);

  std::string m_path;
  Options m_options;
  util::UniqueFd m_root;      // O_DIRECTORY fd of the store; everything else is openat() from it
  util::UniqueFd m_data;      // STORE/data, once it exists
  mode_t m_file_mode = 0600;  // permission bits for new files: the store directory's, minus x
  mode_t m_dir_mode = 0700;   // permission bits (and setgid) for new directories
};

}  // namespace nxlock::store
