// The embedded store's unit tests share these: a temporary store directory (kept when a
// test failed), the documented record and bucket name computed apart from the store,
// forked children, and the FileStoreTest fixture.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/keys.hpp"
#include "store/file/file_store.hpp"
#include "store/file/record.hpp"
#include "support/test_helpers.hpp"
#include "util/crc32c.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"

// How many fsync and fdatasync calls this process made (file_store_test.cpp counts them).
extern std::atomic<int> g_syncs;

namespace nxlock::testing {

// A fresh directory, removed when the test passed, kept and printed when it failed.
class TempDir {
 public:
  TempDir() {
    m_path = make_temp_dir("nxlock-test");
  }
  ~TempDir() {
    if (::testing::Test::HasFailure()) {
      std::cerr << "kept the failed test's directory: " << m_path << "\n";
      return;
    }
    std::error_code ignored;
    std::filesystem::permissions(m_path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(m_path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

// The documented bucket name, computed independently of the store.
inline std::string fnv1a64_hex(std::string_view key) {
  std::uint64_t hash = 0xcbf29ce484222325;
  for (const char c : key) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

inline std::string u32_le(std::uint32_t v) {
  std::string out;
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
  }
  return out;
}

// A record exactly as docs/STORE-FORMAT.md describes it.
inline std::string documented_record(
    const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out =
      std::string("NXLR\x01\0\0\0", 8) + u32_le(static_cast<std::uint32_t>(entries.size()));
  for (const auto& [key, value] : entries) {
    out += u32_le(static_cast<std::uint32_t>(key.size())) + key;
    out += u32_le(static_cast<std::uint32_t>(value.size())) + value;
  }
  return out + u32_le(util::crc32c(out));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Every name in a directory, with its contents for regular files: a fingerprint
// to show a directory was left alone.
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> result;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    result[entry.path().string()] =
        entry.is_regular_file() && !entry.is_symlink() ? read_file(entry.path().string()) : "";
  }
  return result;
}

// Runs `body` and returns the kind of util::Error it threw; fails if it threw none.
inline std::optional<util::ErrorKind> error_kind(const std::function<void()>& body,
                                    std::string* subject = nullptr, std::string* reason = nullptr) {
  try {
    body();
  } catch (const util::Error& e) {
    if (subject != nullptr) {
      *subject = e.subject();
    }
    if (reason != nullptr) {
      *reason = e.reason();
    }
    return e.kind();
  }
  return std::nullopt;
}

// A forked child's failure would otherwise show only as its exit status: say why
// on stderr, where the test's output keeps it.
inline void child_failed(const std::exception& e) {
  std::cerr << "child process " << ::getpid() << " failed: " << e.what() << std::endl;
}

// Runs `body` in a forked child and returns its exit status (or 128 + signal).
inline int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int status = 99;
    try {
      status = body();
    } catch (const std::exception& e) {
      child_failed(e);
      status = 98;
    }
    ::_exit(status);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Makes this (child) process nobody: root ignores permission bits, so permission
// checks only mean something for another user. Returns false if it could not.
inline bool become_nobody() {
  if (::geteuid() != 0) {
    return true;  // already unprivileged
  }
  return ::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0;
}

class FileStoreTest : public ::testing::Test {
 protected:
  std::string store_path() const { return m_dir.path() + "/store"; }
  std::string bucket_path(std::string_view key) const {
    const std::string name = fnv1a64_hex(key);
    return store_path() + "/data/" + name.substr(0, 2) + "/" + name;
  }
  std::string stripe_path(std::string_view key) const {
    return store_path() + "/data/" + fnv1a64_hex(key).substr(0, 2);
  }
  // Makes the store on disk: a store is created by its first write, not by opening it.
  void create_store(const store::FileStore::Options& options = {}) const {
    store::FileStore store(store_path(), options);
    store.set("created", "", store::k_plain_step);
    store.del({"created"});
  }

  TempDir m_dir;
};

}  // namespace nxlock::testing
