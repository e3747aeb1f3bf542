// FileStore: the embedded store, a directory of checksummed per-bucket record files
// serialized by kernel flocks (see docs/STORE-FORMAT.md).
#pragma once

#include "store/store.hpp"
#include "util/fd.hpp"

namespace nxlock::store {

class FileStore final : public Store {
 public:
  struct Options {
    bool create = true;         // create the store directory (0700) if it is missing
    bool durable = false;       // fsync records and directories (power-loss durability)
    bool require_owner = false; // refuse a directory owned by another user (default store)
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
  std::string m_path;
  Options m_options;
  util::UniqueFd m_root;  // O_DIRECTORY fd of the store; everything else is openat() from it
};

}  // namespace nxlock::store
