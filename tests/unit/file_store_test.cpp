// FileStore: the store suite (with MemoryStore as the reference), plus what only the
// embedded store promises: its on-disk format, refusing foreign or corrupt files without
// touching them, not following symlinks, permissions, and many processes at once.
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
#include "store/memory_store.hpp"
#include "unit/store_contract.hpp"
#include "util/crc32c.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/time.hpp"

// Counts the fsync and fdatasync calls of this process: the test binary's
// definitions come before libc's, which they call.
static std::atomic<int> g_syncs{0};

extern "C" int fsync(int fd) {
  using Real = int (*)(int);
  static const auto real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "fsync"));
  ++g_syncs;
  return real(fd);
}

extern "C" int fdatasync(int fd) {
  using Real = int (*)(int);
  static const auto real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "fdatasync"));
  ++g_syncs;
  return real(fd);
}

namespace nxlock::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::FileStore;
using store::WaitResult;
using util::ErrorKind;

// ---- helpers -----------------------------------------------------------------

// A fresh directory, removed when the test passed, kept and printed when it failed.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/nxlock-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    m_path = pattern;
  }
  ~TempDir() {
    if (::testing::Test::HasFailure()) {
      std::cerr << "kept the failed test's directory: " << m_path << "\n";
      return;
    }
    std::error_code ignored;
    fs::permissions(m_path, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(m_path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

// A FileStore in its own TempDir, for the store suite.
class TempFileStore final : public store::Store {
 public:
  TempFileStore() : m_store(m_dir.path() + "/store", {}) {}
  std::string describe() const override { return m_store.describe(); }
  store::SetIfAbsent set_if_absent(std::string_view k, std::string_view v,
                                   std::optional<std::string_view> c = {},
                                   store::StepPolicy p = {}) override {
    return m_store.set_if_absent(k, v, c, p);
  }
  std::optional<std::string> get(std::string_view k) override { return m_store.get(k); }
  store::Swap get_and_set(std::string_view k, std::string_view v,
                          std::optional<store::Takeover> t = {},
                          store::StepPolicy p = {}) override {
    return m_store.get_and_set(k, v, t, p);
  }
  void set(std::string_view k, std::string_view v, store::StepPolicy p = {}) override {
    m_store.set(k, v, p);
  }
  std::size_t del(const std::vector<std::string>& keys) override { return m_store.del(keys); }
  bool compare_and_delete(std::string_view k, std::string_view e,
                          std::optional<store::Fence> f = {}, store::StepPolicy p = {}) override {
    return m_store.compare_and_delete(k, e, f, p);
  }
  bool compare_and_set(std::string_view k, std::string_view e, std::string_view v,
                       std::optional<store::Fence> f = {}, store::StepPolicy p = {}) override {
    return m_store.compare_and_set(k, e, v, f, p);
  }
  store::WaitersQueue* queue() override { return m_store.queue(); }
  store::LockListing* listing() override { return m_store.listing(); }
  util::Micros now() override { return m_store.now(); }
  std::unique_ptr<store::Watcher> watch(std::string_view k) override { return m_store.watch(k); }

 private:
  TempDir m_dir;  // declared first: outlives the store
  FileStore m_store;
};

// Tokens as the real backends issue them (the lock layer's own tests script
// plain increments).
// Its clock moves on by a microsecond at least per reading: in one process a
// step takes less than that, while a real backend's take more.
const StoreFactory k_memory_factory{"memory", [] {
                                      auto last = std::make_shared<std::int64_t>(0);
                                      auto clock = [last] {
                                        *last = std::max(*last + 1, util::wall_now().count());
                                        return util::Micros(*last);
                                      };
                                      return std::make_unique<store::MemoryStore>(
                                          clock, store::MemoryStore::Tokens::clock_floor);
                                    }};
const StoreFactory k_file_factory{"file", [] { return std::make_unique<TempFileStore>(); }};

INSTANTIATE_TEST_SUITE_P(Embedded, StoreContract,
                         ::testing::Values(&k_memory_factory, &k_file_factory), factory_name);
INSTANTIATE_TEST_SUITE_P(Embedded, QueueContract, ::testing::Values(&k_file_factory), factory_name);

// The documented bucket name, computed independently of the store.
std::string fnv1a64_hex(std::string_view key) {
  std::uint64_t hash = 0xcbf29ce484222325;
  for (const char c : key) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::string u32_le(std::uint32_t v) {
  std::string out;
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
  }
  return out;
}

// A record exactly as docs/STORE-FORMAT.md describes it.
std::string documented_record(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out =
      std::string("NXLR\x01\0\0\0", 8) + u32_le(static_cast<std::uint32_t>(entries.size()));
  for (const auto& [key, value] : entries) {
    out += u32_le(static_cast<std::uint32_t>(key.size())) + key;
    out += u32_le(static_cast<std::uint32_t>(value.size())) + value;
  }
  return out + u32_le(util::crc32c(out));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Every name in a directory, with its contents for regular files: a fingerprint
// to show a directory was left alone.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> result;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    result[entry.path().string()] =
        entry.is_regular_file() && !entry.is_symlink() ? read_file(entry.path().string()) : "";
  }
  return result;
}

// Runs `body` and returns the kind of util::Error it threw; fails if it threw none.
std::optional<ErrorKind> error_kind(const std::function<void()>& body,
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
void child_failed(const std::exception& e) {
  std::cerr << "child process " << ::getpid() << " failed: " << e.what() << std::endl;
}

// Runs `body` in a forked child and returns its exit status (or 128 + signal).
int in_child(const std::function<int()>& body) {
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
bool become_nobody() {
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
  void create_store(const FileStore::Options& options = {}) const {
    FileStore store(store_path(), options);
    store.set("created", "");
    store.del({"created"});
  }

  TempDir m_dir;
};

// ---- layout and format ---------------------------------------------------------

TEST_F(FileStoreTest, CreatesAPrivateStoreWithItsMarker) {
  const std::string path = m_dir.path() + "/a/b/store";
  const mode_t old_umask = ::umask(0);  // the default store must not depend on the umask
  FileStore::Options options;
  options.require_owner = true;  // the default per-user store
  FileStore store(path, options);
  store.set("k", "v");
  ::umask(old_umask);

  EXPECT_EQ(read_file(path + "/nxlock-store"), "nxlock-store 2\n");
  EXPECT_EQ(mode_of(m_dir.path() + "/a"), 0700u);
  EXPECT_EQ(mode_of(m_dir.path() + "/a/b"), 0700u);
  EXPECT_EQ(mode_of(path), 0700u);
  EXPECT_EQ(mode_of(path + "/nxlock-store"), 0600u);
  EXPECT_EQ(mode_of(path + "/data"), 0700u);
  const std::string name = fnv1a64_hex("k");
  EXPECT_EQ(mode_of(path + "/data/" + name.substr(0, 2)), 0700u);
  EXPECT_EQ(mode_of(path + "/data/" + name.substr(0, 2) + "/" + name), 0600u);
}

// A path given explicitly (NXLOCK_STORE, file://) is made as mkdir(1) makes
// it: the umask decides, and a setgid parent's group is inherited.
TEST_F(FileStoreTest, AnExplicitStoreHonoursTheUmaskAndTheParentsGroup) {
  const std::string parent = m_dir.path() + "/shared";
  ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 02770), 0);
  const std::string path = parent + "/store";
  const mode_t old_umask = ::umask(007);
  {
    FileStore store(path, {});
    EXPECT_TRUE(store.set_if_absent("k", "v", "c").fence.has_value());
  }
  ::umask(old_umask);
  EXPECT_EQ(mode_of(path), 02770u);
  const std::string name = fnv1a64_hex("k");
  EXPECT_EQ(mode_of(path + "/data/" + name.substr(0, 2) + "/" + name), 0660u);
  EXPECT_EQ(mode_of(path + "/fence"), 0660u);
}

// Opening a store that is not there makes nothing; reads
// find every key absent, and the first write makes it.
TEST_F(FileStoreTest, OpeningAndReadingAMissingStoreCreatesNothing) {
  const std::string path = m_dir.path() + "/not/yet";
  {
    FileStore store(path, {});
    EXPECT_EQ(store.get("k"), std::nullopt);
    EXPECT_EQ(store.del({"k"}), 0u);
    EXPECT_FALSE(store.compare_and_delete("k", "v"));
    EXPECT_FALSE(store.compare_and_set("k", "v", "w"));
  }
  EXPECT_FALSE(fs::exists(m_dir.path() + "/not"));
  FileStore store(path, {});
  EXPECT_TRUE(store.set_if_absent("k", "v"));
  EXPECT_EQ(read_file(path + "/nxlock-store"), "nxlock-store 2\n");
}

TEST_F(FileStoreTest, NewFilesTakeTheStoreDirectorysBits) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(store_path().c_str(), 02770), 0);  // a group-shared store
  const mode_t old_umask = ::umask(022);               // would otherwise deny the group
  {
    FileStore store(store_path(), {});
    store.set("k", "v");
  }
  ::umask(old_umask);
  EXPECT_EQ(mode_of(store_path() + "/nxlock-store"), 0660u);
  EXPECT_EQ(mode_of(store_path() + "/data"), 02770u);
  EXPECT_EQ(mode_of(stripe_path("k")), 02770u);
  EXPECT_EQ(mode_of(bucket_path("k")), 0660u);
}

TEST_F(FileStoreTest, RecordsAreExactlyTheDocumentedFormat) {
  FileStore store(store_path(), {});
  store.set("k", "v");
  // The example in docs/STORE-FORMAT.md, byte for byte.
  EXPECT_EQ(read_file(bucket_path("k")),
            std::string("NXLR\x01\0\0\0\x01\0\0\0\x01\0\0\0k\x01\0\0\0v\xaa\x49\xba\x08", 26));
  EXPECT_EQ(read_file(bucket_path("k")), documented_record({{"k", "v"}}));
  EXPECT_TRUE(store.compare_and_delete("k", "v"));
  EXPECT_FALSE(fs::exists(bucket_path("k")));  // an empty bucket is removed, not kept
}

TEST_F(FileStoreTest, ReadsARecordWrittenByHandToTheDocumentedFormat) {
  create_store();
  fs::create_directories(stripe_path("hand"));
  write_file(bucket_path("hand"), documented_record({{"hand", "made"}}));
  FileStore store(store_path(), {});
  EXPECT_EQ(store.get("hand"), "made");
}

TEST_F(FileStoreTest, ReopensAnExistingStore) {
  {
    FileStore store(store_path() + "/", {});  // a trailing slash is the same store
    EXPECT_EQ(store.describe(), store_path());
    store.set("k", "v");
  }
  FileStore store(store_path(), {});
  EXPECT_EQ(store.get("k"), "v");
}

TEST_F(FileStoreTest, InitializesAnExistingEmptyDirectory) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0700), 0);
  FileStore store(store_path(), {});
  EXPECT_EQ(read_file(store_path() + "/nxlock-store"), "nxlock-store 2\n");
}

TEST_F(FileStoreTest, AMissingStoreIsNotCreatedWhenAskedNotTo) {
  FileStore::Options options;
  options.create = false;
  EXPECT_EQ(error_kind([&] { FileStore store(store_path(), options); }), ErrorKind::unavailable);
  EXPECT_FALSE(fs::exists(store_path()));
}

TEST_F(FileStoreTest, ManyProcessesInitializeOneDirectoryAtOnce) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0700), 0);
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char byte;
      (void)!::read(gate[0], &byte, 1);  // all start together when the gate closes
      try {
        FileStore store(store_path(), {});
        store.set("k" + std::to_string(i), "v");
        ::_exit(0);
      } catch (const std::exception& e) {
        child_failed(e);
        ::_exit(1);
      }
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  FileStore store(store_path(), {});
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(store.get("k" + std::to_string(i)), "v");
  }
}

// ---- foreign and corrupt files ---------------------------------------------------

TEST_F(FileStoreTest, RefusesAForeignDirectoryAndLeavesItAlone) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0755), 0);
  write_file(store_path() + "/thesis.tex", "\\begin{document}");
  ASSERT_EQ(::mkdir((store_path() + "/data").c_str(), 0755), 0);
  const auto before = snapshot(store_path());
  std::string subject;
  EXPECT_EQ(error_kind([&] { FileStore store(store_path(), {}); }, &subject), ErrorKind::data);
  EXPECT_EQ(subject, store_path());
  EXPECT_EQ(snapshot(store_path()), before);
  EXPECT_EQ(mode_of(store_path()), 0755u);
}

TEST_F(FileStoreTest, RefusesAWrongMarker) {
  for (const std::string marker : {"nxlock-store 3\n", "nxlock-store 1", "hello\n", ""}) {
    SCOPED_TRACE(marker);
    fs::create_directories(store_path());
    write_file(store_path() + "/nxlock-store", marker);
    EXPECT_EQ(error_kind([&] { FileStore store(store_path(), {}); }), ErrorKind::data);
    EXPECT_EQ(read_file(store_path() + "/nxlock-store"), marker);
    EXPECT_EQ(std::distance(fs::directory_iterator(store_path()), fs::directory_iterator()), 1);
  }
}

TEST_F(FileStoreTest, RefusesAFileWhereTheStoreShouldBe) {
  write_file(store_path(), "not a directory");
  EXPECT_EQ(error_kind([&] { FileStore store(store_path(), {}); }), ErrorKind::data);
  EXPECT_EQ(read_file(store_path()), "not a directory");
}

// One way of damaging a record file.
struct Damage {
  const char* name;
  std::function<std::string(const std::string&)> apply;
};

TEST_F(FileStoreTest, ACorruptRecordIsReportedByEveryOperationAndNeverTouched) {
  const std::string good = documented_record({{"k", "1732000000"}});
  std::vector<Damage> damages = {
      {"empty", [](const std::string&) { return std::string(); }},
      {"truncated", [](const std::string& s) { return s.substr(0, s.size() - 1); }},
      {"header only", [](const std::string& s) { return s.substr(0, 12); }},
      {"garbage appended", [](const std::string& s) { return s + "garbage"; }},
      {"not a record", [](const std::string&) { return std::string("1732000000\n"); }},
  };
  for (std::size_t at = 0; at < good.size(); ++at) {
    damages.push_back({"a flipped byte", [at](const std::string& s) {
                         std::string bad = s;
                         bad[at] = static_cast<char>(bad[at] ^ 0x20);
                         return bad;
                       }});
  }
  const std::vector<std::pair<const char*, std::function<void(FileStore&)>>> operations = {
      {"get", [](FileStore& s) { s.get("k"); }},
      {"set_if_absent", [](FileStore& s) { s.set_if_absent("k", "2"); }},
      {"get_and_set", [](FileStore& s) { s.get_and_set("k", "2"); }},
      {"set", [](FileStore& s) { s.set("k", "2"); }},
      {"del", [](FileStore& s) { s.del({"k"}); }},
      {"compare_and_delete", [](FileStore& s) { s.compare_and_delete("k", "1732000000"); }},
      {"compare_and_set", [](FileStore& s) { s.compare_and_set("k", "1732000000", "2"); }},
  };

  FileStore store(store_path(), {});
  store.set("k", "1732000000");
  ASSERT_EQ(read_file(bucket_path("k")), good);
  for (std::size_t i = 0; i < damages.size(); ++i) {
    const std::string bad = damages[i].apply(good);
    write_file(bucket_path("k"), bad);
    for (const auto& [name, operation] : operations) {
      SCOPED_TRACE(std::string(damages[i].name) + " #" + std::to_string(i) + ", " + name);
      std::string subject;
      std::string reason;
      EXPECT_EQ(error_kind([&, &op = operation] { op(store); }, &subject, &reason),
                ErrorKind::data);
      EXPECT_EQ(subject, bucket_path("k"));
      // What it is, the key it was read for, and what removing it costs.
      EXPECT_TRUE(reason.starts_with("corrupt record (")) << reason;
      EXPECT_NE(reason.find(") for key 'k'; removing this file drops that key only"),
                std::string::npos)
          << reason;
      EXPECT_EQ(read_file(bucket_path("k")), bad);
    }
  }
}

TEST_F(FileStoreTest, AFailureToCreateTheStoreEndsWithTheHint) {
  // A parent that is a dangling symlink: mkdir fails whoever runs the test (root too).
  ASSERT_EQ(::symlink((m_dir.path() + "/missing/deeper").c_str(), (m_dir.path() + "/link").c_str()),
            0);
  const std::string store = m_dir.path() + "/link/store";
  FileStore::Options options;
  options.create_hint = "where it came from";
  std::string subject;
  std::string reason;
  EXPECT_EQ(error_kind([&] { FileStore(store, options).set("k", "v"); }, &subject, &reason),
            ErrorKind::internal);
  EXPECT_EQ(subject, store);
  EXPECT_EQ(reason, "create store directory: No such file or directory (where it came from)");
  // Without a hint (a store named explicitly), as before.
  EXPECT_EQ(error_kind([&] { FileStore(store, {}).set("k", "v"); }, &subject, &reason),
            ErrorKind::internal);
  EXPECT_EQ(reason, "create store directory: No such file or directory");
}

TEST_F(FileStoreTest, ARecordInTheWrongBucketIsCorrupt) {
  FileStore store(store_path(), {});
  fs::create_directories(stripe_path("k"));
  write_file(bucket_path("k"), documented_record({{"k", "1"}, {"other", "2"}}));
  EXPECT_EQ(error_kind([&] { store.get("k"); }), ErrorKind::data);
  write_file(bucket_path("k"), documented_record({{"k", "1"}, {"k", "2"}}));
  EXPECT_EQ(error_kind([&] { store.get("k"); }), ErrorKind::data);
}

// ---- symlinks and other planted things -------------------------------------------

TEST_F(FileStoreTest, DoesNotFollowASymlinkAsTheStore) {
  const std::string target = m_dir.path() + "/target";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);  // empty: would be initialized if followed
  ASSERT_EQ(::symlink(target.c_str(), store_path().c_str()), 0);
  std::string subject;
  EXPECT_EQ(error_kind([&] { FileStore store(store_path(), {}); }, &subject), ErrorKind::data);
  EXPECT_EQ(subject, store_path());
  EXPECT_EQ(error_kind([&] { FileStore store(store_path() + "/", {}); }), ErrorKind::data);
  EXPECT_TRUE(fs::is_empty(target));
}

TEST_F(FileStoreTest, DoesNotFollowASymlinkAsAStripeDirectory) {
  const std::string target = m_dir.path() + "/target";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  FileStore store(store_path(), {});
  store.set("other", "x");  // makes data/
  fs::create_directories(store_path() + "/data");
  ASSERT_NE(fnv1a64_hex("other").substr(0, 2), fnv1a64_hex("k").substr(0, 2));
  ASSERT_EQ(::symlink(target.c_str(), stripe_path("k").c_str()), 0);

  EXPECT_EQ(error_kind([&] { store.get("k"); }), ErrorKind::data);
  EXPECT_EQ(error_kind([&] { store.set("k", "v"); }), ErrorKind::data);
  EXPECT_EQ(error_kind([&] { store.del({"k"}); }), ErrorKind::data);
  EXPECT_EQ(error_kind([&] { store.watch("k"); }), ErrorKind::data);
  EXPECT_TRUE(fs::is_empty(target));
}

TEST_F(FileStoreTest, DoesNotFollowASymlinkAsABucket) {
  // The target is a valid record for the key: following the link would serve it.
  const std::string target = m_dir.path() + "/target";
  const std::string record = documented_record({{"k", "someone else's"}});
  write_file(target, record);
  FileStore store(store_path(), {});
  fs::create_directories(stripe_path("k"));
  ASSERT_EQ(::symlink(target.c_str(), bucket_path("k").c_str()), 0);

  for (const auto& operation : std::vector<std::function<void()>>{
           [&] { store.get("k"); }, [&] { store.set("k", "v"); },
           [&] { store.get_and_set("k", "v"); }, [&] { store.del({"k"}); },
           [&] { store.compare_and_delete("k", "someone else's"); }}) {
    EXPECT_EQ(error_kind(operation), ErrorKind::data);
  }
  EXPECT_EQ(read_file(target), record);
  EXPECT_TRUE(fs::is_symlink(bucket_path("k")));
}

TEST_F(FileStoreTest, AFifoAsABucketIsAnErrorNotAHang) {
  FileStore store(store_path(), {});
  fs::create_directories(stripe_path("k"));
  ASSERT_EQ(::mkfifo(bucket_path("k").c_str(), 0600), 0);
  EXPECT_EQ(error_kind([&] { store.get("k"); }), ErrorKind::data);
  EXPECT_EQ(error_kind([&] { store.set("k", "v"); }), ErrorKind::data);
}

TEST_F(FileStoreTest, AStaleTemporaryFileDoesNotMatter) {
  create_store();
  FileStore store(store_path(), {});
  fs::create_directories(stripe_path("k"));
  const std::string temp = stripe_path("k") + "/." + fnv1a64_hex("k") + ".tmp";
  write_file(temp, "half a record from a writer that was killed");
  const std::string elsewhere = m_dir.path() + "/elsewhere";
  write_file(elsewhere, "precious");
  EXPECT_TRUE(store.set_if_absent("k", "v"));
  EXPECT_EQ(store.get("k"), "v");
  // Even a link planted at the temporary name is replaced, not written through.
  ASSERT_EQ(::symlink(elsewhere.c_str(), temp.c_str()), 0);
  store.set("k", "w");
  EXPECT_EQ(store.get("k"), "w");
  EXPECT_EQ(read_file(elsewhere), "precious");
}

// ---- ownership and permissions ---------------------------------------------------

TEST_F(FileStoreTest, RequireOwnerRefusesSomeoneElsesDirectory) {
  FileStore::Options options;
  options.require_owner = true;
  create_store(options);

  std::string foreign = "/";  // owned by root: someone else's unless we are root
  if (::geteuid() == 0) {
    foreign = m_dir.path() + "/foreign";
    ASSERT_EQ(::mkdir(foreign.c_str(), 0700), 0);
    ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534), 0);
  }
  std::string subject;
  EXPECT_EQ(error_kind([&] { FileStore theirs(foreign, options); }, &subject),
            ErrorKind::permission);
  EXPECT_EQ(subject, foreign);
}

TEST_F(FileStoreTest, AnInaccessibleStoreIsAPermissionError) {
  {
    FileStore store(store_path(), {});
    store.set("k", "v");
  }
  ASSERT_EQ(::chmod(m_dir.path().c_str(), 0755), 0);  // nobody may look inside the temp dir
  ASSERT_EQ(::chmod(store_path().c_str(), 0), 0);
  const int status = in_child([&] {
    if (!become_nobody()) {
      return 10;
    }
    std::string subject;
    const auto kind = error_kind([&] { FileStore store(store_path(), {}); }, &subject);
    if (kind != ErrorKind::permission) {
      return 11;
    }
    return subject == store_path() ? 0 : 12;
  });
  ::chmod(store_path().c_str(), 0700);
  EXPECT_EQ(status, 0) << "10: could not drop privileges, 11: not a permission error, "
                          "12: the message does not name the store";
}

TEST_F(FileStoreTest, AReadOnlyStoreCanBeReadButNotWritten) {
  {
    FileStore store(store_path(), {});
    store.set("k", "v");
  }
  ASSERT_EQ(::chmod(m_dir.path().c_str(), 0755), 0);
  // Readable by everyone, writable by no one (root aside, hence the child).
  const auto set_modes = [&](fs::perms dirs, fs::perms files) {
    for (const auto& entry : fs::recursive_directory_iterator(store_path())) {
      fs::permissions(entry.path(), entry.is_directory() ? dirs : files);
    }
    fs::permissions(store_path(), dirs);
  };
  set_modes(fs::perms(0555), fs::perms(0444));
  const int status = in_child([&] {
    if (!become_nobody()) {
      return 10;
    }
    FileStore store(store_path(), {});
    if (store.get("k") != "v") {
      return 11;
    }
    if (error_kind([&] { store.set("k", "w"); }) != ErrorKind::permission) {
      return 12;
    }
    // Nothing to delete needs no write access at all.
    return store.del({"absent"}) == 0 ? 0 : 13;
  });
  set_modes(fs::perms(0700), fs::perms(0600));
  EXPECT_EQ(status, 0) << "10: could not drop privileges, 11: could not read, 12: not a "
                          "permission error, 13: del failed";
}

// ---- hash collisions -------------------------------------------------------------

TEST_F(FileStoreTest, CollidingKeysShareOneBucket) {
  // A real FNV-1a 64 collision, found with a Pollard-rho search.
  const std::string a = "95625d3408faf04c";
  const std::string b = "389a3fbdf5c85d1b";
  ASSERT_EQ(fnv1a64_hex(a), fnv1a64_hex(b));
  FileStore store(store_path(), {});

  EXPECT_TRUE(store.set_if_absent(a, "A"));
  EXPECT_EQ(store.get(b), std::nullopt);
  EXPECT_TRUE(store.set_if_absent(b, "B"));
  EXPECT_FALSE(store.set_if_absent(a, "again"));
  EXPECT_FALSE(store.set_if_absent(b, "again"));
  EXPECT_EQ(store.get(a), "A");
  EXPECT_EQ(store.get(b), "B");
  EXPECT_EQ(read_file(bucket_path(a)), documented_record({{a, "A"}, {b, "B"}}));

  EXPECT_EQ(store.get_and_set(a, "A2").old, "A");
  EXPECT_TRUE(store.compare_and_set(b, "B", "B2"));
  EXPECT_FALSE(store.compare_and_delete(a, "B2"));
  EXPECT_EQ(store.del({a}), 1u);
  EXPECT_EQ(store.get(a), std::nullopt);
  EXPECT_EQ(store.get(b), "B2");
  EXPECT_EQ(read_file(bucket_path(a)), documented_record({{b, "B2"}}));
  EXPECT_TRUE(store.compare_and_delete(b, "B2"));
  EXPECT_FALSE(fs::exists(bucket_path(a)));
}

// ---- watching ----------------------------------------------------------------------

TEST_F(FileStoreTest, AWatcherIgnoresOtherKeysInItsStripe) {
  FileStore store(store_path(), {});
  std::string neighbour;
  for (int i = 0; neighbour.empty(); ++i) {
    const std::string candidate = "n" + std::to_string(i);
    if (fnv1a64_hex(candidate).substr(0, 2) == fnv1a64_hex("k").substr(0, 2)) {
      neighbour = candidate;
    }
  }
  const auto watcher = store.watch("k");
  store.set(neighbour, "x");
  EXPECT_EQ(watcher->wait(50ms, -1), WaitResult::timed_out);
  store.set("k", "y");
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);
}

TEST_F(FileStoreTest, AWatcherOutlivesItsDirectory) {
  FileStore store(store_path(), {});
  const auto watcher = store.watch("k");
  fs::remove_all(stripe_path("k"));  // someone cleans up under a waiting lock
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);
  EXPECT_EQ(watcher->wait(50ms, -1), WaitResult::timed_out);
  store.set("k", "v");
  EXPECT_EQ(watcher->wait(2s, -1), WaitResult::changed);  // now by polling
}

TEST_F(FileStoreTest, AWatcherWakesForAnotherProcess) {
  FileStore store(store_path(), {});
  const auto watcher = store.watch("k");
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(gate[1]);
    char byte;
    (void)!::read(gate[0], &byte, 1);
    FileStore other(store_path(), {});
    ::_exit(other.set_if_absent("k", "theirs") ? 0 : 1);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // lets the child go: the watch is already armed
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(watcher->wait(10s, -1), WaitResult::changed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(store.get("k"), "theirs");
}

// This process's open inotify instances.
int inotify_instances() {
  int count = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    if (fs::read_symlink(entry.path(), error).string() == "anon_inode:inotify") {
      ++count;
    }
  }
  return count;
}

// Closing an inotify instance that had a watch waits for a kernel grace period
// (BENCHMARKS.md, "One inotify instance per store"): a waiter that has just taken
// its lock must not spend that before its job starts, so the store keeps one
// instance for all its watches.
TEST_F(FileStoreTest, AWatchEndsWithoutClosingTheStoresInotifyInstance) {
  FileStore store(store_path(), {});
  const int before = inotify_instances();
  store.watch("k").reset();
  EXPECT_EQ(inotify_instances(), before + 1);  // still open, owned by the store
  store.watch("j").reset();
  EXPECT_EQ(inotify_instances(), before + 1);  // the same one again
}

TEST_F(FileStoreTest, AWatcherIgnoresAnEarlierWatchersEventsInTheSharedInstance) {
  FileStore store(store_path(), {});
  std::string other;  // a key in another stripe
  for (int i = 0; other.empty(); ++i) {
    const std::string candidate = "o" + std::to_string(i);
    if (fnv1a64_hex(candidate).substr(0, 2) != fnv1a64_hex("k").substr(0, 2)) {
      other = candidate;
    }
  }
  auto first = store.watch("k");
  store.set("k", "v");  // an event the first watcher never reads
  first.reset();
  const auto second = store.watch(other);
  EXPECT_EQ(second->wait(50ms, -1), WaitResult::timed_out);
  store.set(other, "w");
  EXPECT_EQ(second->wait(2s, -1), WaitResult::changed);
}

TEST_F(FileStoreTest, TwoWatchersAtOnceBothWake) {
  FileStore store(store_path(), {});
  const auto one = store.watch("k");
  const auto two = store.watch("k");
  store.set("k", "v");
  EXPECT_EQ(one->wait(2s, -1), WaitResult::changed);
  EXPECT_EQ(two->wait(2s, -1), WaitResult::changed);
}

// ---- many processes, crashes ------------------------------------------------------

TEST_F(FileStoreTest, ConcurrentProcessesStayAtomic) {
  constexpr int k_processes = 4;
  constexpr int k_operations = 500;
  constexpr int k_keys = 8;
  create_store();

  // Each child reports, per key, how many times it made the key present
  // (set_if_absent true, get_and_set of nothing) and absent (del). With atomic
  // operations these alternate, so per key: made present - made absent = present now.
  int results[2];
  ASSERT_EQ(::pipe(results), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < k_processes; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(results[0]);
      std::int64_t counts[k_keys][2] = {};
      try {
        FileStore store(store_path(), {});
        std::mt19937 random(static_cast<unsigned>(p + 1));
        const std::string me = "process " + std::to_string(p);
        for (int i = 0; i < k_operations; ++i) {
          const int k = static_cast<int>(random() % k_keys);
          const std::string key = "shared:" + std::to_string(k);
          switch (random() % 3) {
            case 0:
              counts[k][0] += store.set_if_absent(key, me) ? 1 : 0;
              break;
            case 1:
              counts[k][0] += store.get_and_set(key, me).old ? 0 : 1;
              break;
            default:
              counts[k][1] += static_cast<std::int64_t>(store.del({key}));
              break;
          }
        }
      } catch (const std::exception& e) {
        child_failed(e);
        ::_exit(1);
      }
      const bool written = ::write(results[1], counts, sizeof counts) == sizeof counts;
      ::_exit(written ? 0 : 2);
    }
    children.push_back(pid);
  }
  ::close(results[1]);
  std::int64_t totals[k_keys][2] = {};
  for (int p = 0; p < k_processes; ++p) {
    std::int64_t counts[k_keys][2] = {};
    ASSERT_EQ(::read(results[0], counts, sizeof counts), static_cast<ssize_t>(sizeof counts));
    for (int k = 0; k < k_keys; ++k) {
      totals[k][0] += counts[k][0];
      totals[k][1] += counts[k][1];
    }
  }
  ::close(results[0]);
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  FileStore store(store_path(), {});
  for (int k = 0; k < k_keys; ++k) {
    const auto value = store.get("shared:" + std::to_string(k));  // parses the bucket
    EXPECT_EQ(totals[k][0] - totals[k][1], value ? 1 : 0) << "key " << k;
    if (value) {
      EXPECT_TRUE(value->starts_with("process ")) << *value;
    }
  }
}

TEST_F(FileStoreTest, KillingAWriterAtAnyInstantLeavesAWholeRecord) {
  create_store();
  for (int round = 0; round < 20; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      FileStore store(store_path(), {});
      for (std::uint64_t i = 0;; ++i) {
        // Large values, so a kill often lands mid-write.
        store.set("k", std::string(200 * 1024, static_cast<char>('a' + i % 26)));
        if (i == 0) {
          (void)!::write(ready[1], "x", 1);
        }
      }
    }
    ::close(ready[1]);
    char byte;
    const bool started = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    // Some writes later: the instant does not matter, that is the point.
    ::usleep(static_cast<useconds_t>(round * 500));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_TRUE(started);

    FileStore store(store_path(), {});
    const auto value = store.get("k");
    ASSERT_TRUE(value.has_value());
    ASSERT_EQ(value->size(), 200u * 1024);
    EXPECT_EQ(value->find_first_not_of(value->front()), std::string::npos);
  }
}

// Durable mode gives the same answers, and syncs every write that reported
// success (the record before its rename, the directory after it or after an
// unlink); the default mode syncs nothing once the store exists.
TEST_F(FileStoreTest, DurableModeWorksTheSameAndSyncsEveryWrite) {
  FileStore::Options options;
  options.durable = true;
  FileStore store(store_path(), options);
  store.set("other", "x");  // the data directory and the stripes exist from here on
  store.set("k", "x");
  EXPECT_TRUE(store.compare_and_delete("k", "x"));

  const auto syncs_of = [](const std::function<void()>& operation) {
    const int before = g_syncs;
    operation();
    return g_syncs - before;
  };
  int syncs = syncs_of([&] { EXPECT_TRUE(store.set_if_absent("k", "v")); });
  EXPECT_GE(syncs, 2) << "durable set_if_absent: record and directory";
  syncs = syncs_of([&] { EXPECT_EQ(store.get_and_set("k", "w").old, "v"); });
  EXPECT_GE(syncs, 2) << "durable get_and_set: record and directory";
  syncs = syncs_of([&] { EXPECT_TRUE(store.compare_and_set("k", "w", "y")); });
  EXPECT_GE(syncs, 2) << "durable compare_and_set: record and directory";
  syncs = syncs_of([&] { EXPECT_TRUE(store.compare_and_delete("k", "y")); });
  EXPECT_GE(syncs, 1) << "durable compare_and_delete: the directory after the unlink";
  syncs = syncs_of([&] { EXPECT_EQ(store.get("k"), std::nullopt); });
  EXPECT_EQ(syncs, 0) << "a read";
  syncs = syncs_of([&] { EXPECT_FALSE(store.compare_and_delete("k", "y")); });
  EXPECT_EQ(syncs, 0) << "a write that changed nothing";

  FileStore fast(store_path(), {});
  syncs = syncs_of([&] {
    EXPECT_TRUE(fast.set_if_absent("k", "v"));
    EXPECT_TRUE(fast.compare_and_delete("k", "v"));
  });
  EXPECT_EQ(syncs, 0) << "the default mode";
}

// The waiter that takes the lock leaves the line at its store's next write
// (with run-locked, the holder's record once the job runs), not between the
// lock and the job; and its own release is such a write, so the next waiter
// is first by then. Another store (process) sees the line meanwhile.
TEST_F(FileStoreTest, TheWaiterThatTakesTheLockLeavesTheLineAtItsNextWrite) {
  const util::Micros lease(5'000'000);
  FileStore holder(store_path(), {});
  FileStore other(store_path(), {});
  other.set("k", "held");
  ASSERT_EQ(holder.queue()->take_or_queue("k", "v", "c", "q", "qa", true, lease).outcome,
            store::WaitersQueue::QueuedSet::Outcome::held);
  ASSERT_EQ(other.queue()->take_or_queue("k", "w", "c", "q", "qb", true, lease).outcome,
            store::WaitersQueue::QueuedSet::Outcome::behind);
  ASSERT_EQ(other.del({"k"}), 1u);

  const auto taken = holder.queue()->take_or_queue("k", "v", "c", "q", "qa", true, lease);
  ASSERT_EQ(taken.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  EXPECT_NE(other.get("q").value_or("").find("qa "), std::string::npos) << "not left yet";
  holder.set("holder-record", "x");
  EXPECT_EQ(other.get("q").value_or("").find("qa "), std::string::npos) << "left at the write";
  EXPECT_NE(other.get("q").value_or("").find("qb "), std::string::npos);

  // Taken again and released at once: the release leaves the line first, so
  // the next waiter is first when it is woken.
  ASSERT_TRUE(holder.queue()->release_and_wake("k", "v", store::Fence("c", *taken.fence), "q"));
  ASSERT_EQ(holder.queue()->take_or_queue("k", "v", "c", "q", "qa", true, lease).outcome,
            store::WaitersQueue::QueuedSet::Outcome::behind);
  const auto b = other.queue()->take_or_queue("k", "w", "c", "q", "qb", true, lease);
  ASSERT_EQ(b.outcome, store::WaitersQueue::QueuedSet::Outcome::set);
  ASSERT_TRUE(other.queue()->release_and_wake("k", "w", store::Fence("c", *b.fence), "q"));
  EXPECT_EQ(holder.get("q").value_or("").find("qb "), std::string::npos);

  // A store that closes leaves the line too.
  {
    FileStore short_lived(store_path(), {});
    ASSERT_EQ(short_lived.queue()->take_or_queue("k", "v", "c", "q", "qa", true, lease).outcome,
              store::WaitersQueue::QueuedSet::Outcome::set);
    EXPECT_NE(other.get("q").value_or("").find("qa "), std::string::npos);
  }
  EXPECT_EQ(other.get("q"), std::nullopt) << "the line is empty";
}

TEST_F(FileStoreTest, TheEmptyKeyDoesNotCrash) {
  FileStore store(store_path(), {});
  EXPECT_TRUE(store.set_if_absent("", "v"));
  EXPECT_EQ(store.get(""), "v");
  EXPECT_EQ(store.del({""}), 1u);
}

// ---- tokens, liveness, nothing left behind -----------------------------------------

// A key other than `avoid` whose bucket lies in `stripe` (two hex digits).
std::string key_in_stripe(const std::string& stripe, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string key = prefix + std::to_string(i);
    if (fnv1a64_hex(key).substr(0, 2) == stripe) {
      return key;
    }
  }
}

std::size_t files_in(const std::string& dir) {
  std::size_t n = 0;
  if (fs::exists(dir)) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      n += entry.is_directory() ? 0 : 1;
    }
  }
  return n;
}

// A child process that takes lock `key` (value `value`) in the store at `path`,
// writes beside it what run-locked writes, and then waits to be killed; or
// exits at once with `exit_at_once`. Returns its pid once the lock is taken.
pid_t owner_process(const std::string& path, const std::string& key, const std::string& value,
                    bool exit_at_once) {
  int ready[2];
  if (::pipe(ready) != 0) {
    return -1;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    int status = 0;
    try {
      FileStore::Options options;
      options.record_owner = true;  // as run-locked opens it
      FileStore store(path, options);
      status = store.set_if_absent(key, value, "{" + key + "}:fence").fence ? 0 : 1;
      store.set("{" + key + "}:holder", "{\"acquired_at\":1,\"value\":\"" + value + "\"}");
    } catch (const std::exception& e) {
      child_failed(e);
      status = 98;
    }
    (void)!::write(ready[1], "x", 1);
    if (!exit_at_once) {
      for (;;) {
        ::pause();
      }
    }
    ::_exit(status);
  }
  ::close(ready[1]);
  char byte = 0;
  (void)!::read(ready[0], &byte, 1);
  ::close(ready[0]);
  return pid;
}

void reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// One counter for the whole store, tokens at or above the clock in
// microseconds, and none lower after the counter is deleted.
TEST_F(FileStoreTest, TokensComeFromOneCounterAndStayAboveTheClock) {
  FileStore store(store_path(), {});
  std::int64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    const std::int64_t before = util::wall_now().count();
    const auto token = store.set_if_absent("k" + std::to_string(i % 2), "v", "c").fence;
    ASSERT_TRUE(token.has_value());
    EXPECT_GE(*token, before);
    EXPECT_GT(*token, last);
    last = *token;
    ASSERT_TRUE(
        store.compare_and_delete("k" + std::to_string(i % 2), "v", store::Fence("c", *token)));
    if (i == 3) {
      fs::remove(store_path() + "/fence");
    }
  }
  // A released lock leaves nothing: no counter per key, no record.
  EXPECT_EQ(files_in(store_path() + "/data"), 0u);
  EXPECT_EQ(fs::file_size(store_path() + "/fence"), 20u);
  // A counter that is not one is refused, never overwritten.
  write_file(store_path() + "/fence", "garbage");
  EXPECT_EQ(error_kind([&] { store.set_if_absent("k", "v", "c").fence; }), ErrorKind::data);
  EXPECT_EQ(store.get("k"), std::nullopt);
  EXPECT_EQ(read_file(store_path() + "/fence"), "garbage");
}

// The lock layer reads the per-lock counter Redis keeps: here it is the token
// in the lock's record, while the lock is there.
TEST_F(FileStoreTest, TheCounterBesideALockReadsAsItsToken) {
  FileStore store(store_path(), {});
  // The lock layer's names (store/keys.hpp), with and without a hash tag, and
  // for a key that holds a '}' but no tag.
  for (const auto& [key, counter] : std::vector<std::pair<std::string, std::string>>{
           {"k", "{k}:fence:k"}, {"{tag}rest", "{tag}:fence:{tag}rest"}, {"a}b", "}fence:a}b"}}) {
    const auto token = store.set_if_absent(key, "v", counter).fence;
    ASSERT_TRUE(token.has_value());
    EXPECT_EQ(store.get(counter), std::to_string(*token)) << key;
    ASSERT_TRUE(store.compare_and_delete(key, "v", store::Fence(counter, *token)));
    EXPECT_EQ(store.get(counter), std::nullopt) << key;
  }
  // A key of that name (an older store's counter) shows while no lock is there.
  store.set("{k}:fence:k", "41");
  EXPECT_EQ(store.get("{k}:fence:k"), "41");
  const auto token = store.set_if_absent("k", "v", "{k}:fence:k").fence;
  EXPECT_EQ(store.get("{k}:fence:k"), std::to_string(*token));
  store.set("x", "not a lock");
  EXPECT_EQ(store.get("{x}:fence:x"), std::nullopt);
  // Names of other shapes are plain keys.
  EXPECT_EQ(store.get("{k}:fence"), std::nullopt);
}

// While the process that took (or renewed) a lock runs, a caller
// whose clock says it expired does not take it; once the owner is stopped or
// gone, the timestamp decides as before.
TEST_F(FileStoreTest, ALiveOwnersLockIsNotTakenOverBecauseOfAClock) {
  create_store();
  const std::int64_t now = util::whole_seconds(util::wall_now());
  const std::string value = std::to_string(now + 5);
  const pid_t owner = owner_process(store_path(), "k", value, false);
  ASSERT_GT(owner, 0);
  FileStore store(store_path(), {});
  const std::int64_t an_hour_ahead = now + 3600;
  auto swap = store.get_and_set("k", "mine", store::Takeover{"{k}:fence", an_hour_ahead});
  EXPECT_EQ(swap.fence, std::nullopt);
  EXPECT_EQ(swap.old, std::to_string(an_hour_ahead)) << "held, as of the caller's now";
  EXPECT_EQ(store.get("k"), value) << "nothing written";

  // Stopped: it renews nothing, its timestamp alone counts.
  ASSERT_EQ(::kill(owner, SIGSTOP), 0);
  ASSERT_TRUE([&] {
    for (int i = 0; i < 500; ++i) {
      std::ifstream stat("/proc/" + std::to_string(owner) + "/stat");
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      if (text.find(") T ") != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }());
  swap = store.get_and_set("k", "mine", store::Takeover{"{k}:fence", an_hour_ahead});
  EXPECT_TRUE(swap.fence.has_value());
  EXPECT_EQ(swap.old, value);
  reap(owner);

  // Gone (a `lock` whose process exited): the timestamp decides.
  const pid_t gone = owner_process(store_path(), "g", value, true);
  reap(gone);
  swap = store.get_and_set("g", "mine", store::Takeover{"{g}:fence", an_hour_ahead});
  EXPECT_TRUE(swap.fence.has_value());
  // Liveness never ends a lock sooner: a fresh lock of a dead owner is held.
  const pid_t dead = owner_process(store_path(), "d", std::to_string(now + 60), true);
  reap(dead);
  swap = store.get_and_set("d", "mine", store::Takeover{"{d}:fence", now});
  EXPECT_EQ(swap.fence, std::nullopt);
}

// A process that does not renew while it lives (lock, run-locked --no-renew)
// is not recorded as the owner: its lock's timestamp alone decides.
TEST_F(FileStoreTest, ALockTakenWithoutRecordingTheOwnerEndsAtItsTimestamp) {
  create_store();
  const std::int64_t now = util::whole_seconds(util::wall_now());
  FileStore unrecorded(store_path(), {});
  ASSERT_TRUE(unrecorded.set_if_absent("k", std::to_string(now + 5), "{k}:fence:k").fence);
  // This very process lives on, but is not the lock's recorded owner.
  const pid_t caller = ::fork();
  if (caller == 0) {
    int status = 0;
    try {
      FileStore store(store_path(), {});
      status =
          store.get_and_set("k", "mine", store::Takeover{"{k}:fence:k", now + 3600}).fence ? 0 : 1;
    } catch (const std::exception& e) {
      child_failed(e);
      status = 98;
    }
    ::_exit(status);
  }
  int status = -1;
  ASSERT_EQ(::waitpid(caller, &status, 0), caller);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the lock was kept";
}

// An owning step removes, from its stripe, the records of expired
// locks that nobody alive owns, and the details written beside them; never a
// plain key, never a lock whose owner lives.
TEST_F(FileStoreTest, AnOwningStepRemovesAbandonedExpiredLocksBesideIt) {
  create_store();
  const std::string stripe = fnv1a64_hex("{abandoned}:holder").substr(0, 2);
  const std::string abandoned = key_in_stripe(stripe, "abandoned-");
  const std::string held = key_in_stripe(stripe, "held-");
  const std::string plain = key_in_stripe(stripe, "plain-");
  const std::string expired = "1000000000";
  reap(owner_process(store_path(), abandoned, expired, true));
  const pid_t live = owner_process(store_path(), held, expired, false);
  FileStore store(store_path(), {});
  store.set(plain, expired);
  const std::string holder = "{" + abandoned + "}:holder";
  ASSERT_TRUE(store.get(holder).has_value());

  // An owning step elsewhere in the stripe.
  const std::string later = key_in_stripe(stripe, "later-");
  ASSERT_TRUE(store.set_if_absent(later, "v", "c").fence.has_value());
  // Its own holder record's stripe may differ: sweep that one too.
  const std::string holder_stripe = fnv1a64_hex(holder).substr(0, 2);
  const std::string beside = key_in_stripe(holder_stripe, "beside-");
  ASSERT_TRUE(store.set_if_absent(beside, "v", "c").fence.has_value());

  EXPECT_EQ(store.get(abandoned), std::nullopt);
  EXPECT_EQ(store.get(holder), std::nullopt);
  EXPECT_EQ(store.get(held), expired) << "its owner lives";
  EXPECT_EQ(store.get(plain), expired) << "not nxlock's lock: never removed";
  reap(live);
}

// A FIFO of a waiter that died goes when a release meets it, even
// after its place in line lapsed; FIFOs take the store's bits, not the umask's.
TEST_F(FileStoreTest, ADeadWaitersFifoGoesAtTheNextRelease) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(store_path().c_str(), 02770), 0);
  FileStore holder(store_path(), {});
  const auto taken = holder.set_if_absent("k", "v", "c").fence;
  ASSERT_TRUE(taken.has_value());
  const std::string wait_dir = store_path() + "/wait";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t waiter = ::fork();
  if (waiter == 0) {
    ::close(ready[0]);
    ::umask(077);  // its FIFO still takes the store's bits
    FileStore store(store_path(), {});
    store.queue()->take_or_queue("k", "w", "c", "q", "qdead", true, 1ms);
    auto watch = store.queue()->watch_turn("k", "qdead");
    watch->wait(1ms, -1);  // the FIFO is made and held
    (void)!::write(ready[1], "x", 1);
    for (;;) {
      ::pause();
    }
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(files_in(wait_dir), 1u);
  EXPECT_EQ(mode_of(wait_dir + "/qdead"), 0660u);
  reap(waiter);                      // killed: its FIFO stays on disk, open by nobody
  std::this_thread::sleep_for(5ms);  // and its place in line (a 1 ms lease) lapses
  ASSERT_EQ(files_in(wait_dir), 1u);
  ASSERT_TRUE(holder.queue()->release_and_wake("k", "v", store::Fence("c", *taken), "q"));
  EXPECT_EQ(files_in(wait_dir), 0u);
  EXPECT_EQ(holder.get("q"), std::nullopt) << "the line goes with it";
}

// A lease changes the lock's bucket and the leases' bucket in one transaction
// under both stripe locks: also when both live in one stripe (one flock, or the
// transaction would wait on itself) and in either stripe order.
TEST(FileStoreShared, LeasesWorkWhateverStripesTheTwoKeysShare) {
  TempDir dir;
  FileStore file(dir.path() + "/store", {});
  store::SharedLeases& shared = *file.shared();
  std::optional<std::string> same;
  std::optional<std::string> lower;
  std::optional<std::string> higher;
  for (int i = 0; i < 20000 && !(same && lower && higher); ++i) {
    const std::string key = "k" + std::to_string(i);
    const auto a = store::record::bucket_of(key).stripe;
    const auto b = store::record::bucket_of(store::shared_key(key)).stripe;
    auto& slot = a == b ? same : a < b ? lower : higher;
    if (!slot) {
      slot = key;
    }
  }
  ASSERT_TRUE(same && lower && higher);
  const std::int64_t expiry = util::whole_seconds(util::wall_now()) + 60;
  for (const auto& key : {*same, *lower, *higher}) {
    const std::string leases = store::shared_key(key);
    const std::string queue = store::queue_key(key);
    const std::string counter = store::fence_key(key);
    const store::SharedLeases::Keys keys{key, counter, leases, queue};
    store::SharedLeases::TakeRequest request;
    request.id = "s1";
    request.expiry = expiry;
    request.lease = util::Micros(1'000'000);
    const auto a = shared.take(keys, request);
    request.id = "s2";
    request.expiry = expiry + 5;
    const auto b = shared.take(keys, request);
    ASSERT_EQ(a.outcome, store::SharedLeases::Take::Outcome::taken) << key;
    ASSERT_EQ(b.outcome, store::SharedLeases::Take::Outcome::taken) << key;
    EXPECT_GT(*b.fence, *a.fence);
    EXPECT_EQ(file.get(key), std::to_string(expiry + 5));
    const store::LeaseSet set = shared.read(keys);
    EXPECT_EQ(set.leases.size(), 2u);
    EXPECT_TRUE(set.holding);
    EXPECT_EQ(set.lock_value, std::to_string(expiry + 5));
    EXPECT_TRUE(shared.release(keys, {.id = "s2", .expiry = {}, .token = *b.fence}));
    EXPECT_EQ(file.get(key), std::to_string(expiry));
    EXPECT_TRUE(shared.release(keys, {.id = "s1", .expiry = {}, .token = {}}));
    EXPECT_FALSE(shared.release(keys, {.id = "s1", .expiry = {}, .token = {}}));
    EXPECT_EQ(file.get(key), std::nullopt);
    EXPECT_EQ(file.get(leases), std::nullopt);
  }
}

}  // namespace
}  // namespace nxlock::testing
