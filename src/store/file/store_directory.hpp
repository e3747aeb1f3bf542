// The embedded store's directory: finding or creating it, its permission bits, its
// owner, the format marker, and its data/ and wait/ subdirectories (docs/STORE-FORMAT.md,
// "Layout").
#pragma once

#include <sys/types.h>

#include <string>

#include "util/fd.hpp"

namespace nxlock::store {

class StoreDirectory {
 public:
  // The names in the store directory (docs/STORE-FORMAT.md, "Layout"): the
  // format marker, the lock records' stripes, the waiters' FIFOs.
  static constexpr const char* k_marker_name = "nxlock-store";
  static constexpr const char* k_data_name = "data";
  static constexpr const char* k_wait_name = "wait";

  struct Options {
    bool create = true;          // make the directory at the first write if it is missing
    bool durable = false;        // sync new directories' parents
    bool require_owner = false;  // a private store: 0700, and refused if another user owns it
    // Appended to a failure to create the directory, in parentheses: where this
    // path came from and what to do instead (the default store's). Empty: nothing.
    std::string create_hint;
  };

  // Remembers `path` (an absolute directory path); opens nothing yet.
  StoreDirectory(std::string path, Options options);

  // Opens the store directory (with `create` and Options::create, makes it),
  // checks its owner and marker (initializing an empty directory), once; false
  // if it does not exist. Throws util::Error: data (65) for something that is
  // not an nxlock store, permission (77) if it cannot be accessed, unavailable
  // (69) if it is missing and may not be created.
  bool open(bool create);

  // STORE/data and STORE/wait, opened (with `create`, made) on first need; -1 if absent.
  int data_dir(bool create);
  int wait_dir(bool create);

  // Marks a format 1 store 2, before its first token of the new kind: an older
  // nxlock refuses it from then on (its per-key counters would go back).
  void mark_current_format();

  const std::string& path() const { return m_path; }
  int root() const { return m_root.get(); }
  int wait() const { return m_wait.get(); }
  bool durable() const { return m_options.durable; }
  mode_t file_mode() const { return m_file_mode; }  // for new files
  mode_t dir_mode() const { return m_dir_mode; }    // for new directories

 private:
  bool open_root(bool create);
  // Makes the store directory and its missing parents.
  void create_root();
  void check_marker();
  bool directory_is_empty();
  void write_marker();

  std::string m_path;
  Options m_options;
  util::UniqueFd m_root;      // O_DIRECTORY fd of the store; everything else is openat() from it
  util::UniqueFd m_data;      // STORE/data, once it exists
  util::UniqueFd m_wait;      // STORE/wait, once it exists
  mode_t m_file_mode = 0600;  // the store directory's permission bits, minus x
  mode_t m_dir_mode = 0700;   // the store directory's permission bits (and setgid)
  bool m_marker_v1 = false;   // a format 1 store, not yet marked 2
};

}  // namespace nxlock::store
