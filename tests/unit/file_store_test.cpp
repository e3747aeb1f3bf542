// FileStore: the store suite (with MemoryStore as the reference), plus the store directory
// as only the embedded store promises it: its on-disk format, refusing foreign or corrupt
// files without touching them, and its permissions. Beside it: file_bucket_test.cpp,
// file_watcher_test.cpp, file_processes_test.cpp, file_owner_test.cpp.
#include "unit/file_store_fixture.hpp"

#include "store/memory_store.hpp"
#include "unit/store_contract.hpp"

// Counts the fsync and fdatasync calls of this process: the test binary's
// definitions come before libc's, which they call.
std::atomic<int> g_syncs{0};

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

// A FileStore in its own TempDir, for the store suite.
class TempFileStore final : public store::Store {
 public:
  TempFileStore() : m_store(m_dir.path() + "/store", {}) {}
  std::string describe() const override { return m_store.describe(); }
  store::SetIfAbsent set_if_absent(std::string_view k, std::string_view v,
                                   std::optional<std::string_view> c,
                                   store::StepPolicy p) override {
    return m_store.set_if_absent(k, v, c, p);
  }
  std::optional<std::string> get(std::string_view k) override { return m_store.get(k); }
  store::Swap get_and_set(std::string_view k, std::string_view v, std::optional<store::Takeover> t,
                          store::StepPolicy p) override {
    return m_store.get_and_set(k, v, t, p);
  }
  void set(std::string_view k, std::string_view v, store::StepPolicy p) override {
    m_store.set(k, v, p);
  }
  std::size_t del(const std::vector<std::string>& keys) override { return m_store.del(keys); }
  bool compare_and_delete(std::string_view k, std::string_view e, std::optional<store::Fence> f,
                          store::StepPolicy p) override {
    return m_store.compare_and_delete(k, e, f, p);
  }
  bool compare_and_set(std::string_view k, std::string_view e, std::string_view v,
                       std::optional<store::Fence> f, store::StepPolicy p) override {
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

// ---- layout and format ---------------------------------------------------------

TEST_F(FileStoreTest, CreatesAPrivateStoreWithItsMarker) {
  const std::string path = m_dir.path() + "/a/b/store";
  const mode_t old_umask = ::umask(0);  // the default store must not depend on the umask
  FileStore::Options options;
  options.require_owner = true;  // the default per-user store
  FileStore store(path, options);
  store.set("k", "v", store::k_plain_step);
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
    EXPECT_TRUE(store.set_if_absent("k", "v", "c", store::k_plain_step).fence.has_value());
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
    EXPECT_FALSE(store.compare_and_delete("k", "v", std::nullopt, store::k_plain_step));
    EXPECT_FALSE(store.compare_and_set("k", "v", "w", std::nullopt, store::k_plain_step));
  }
  EXPECT_FALSE(fs::exists(m_dir.path() + "/not"));
  FileStore store(path, {});
  EXPECT_TRUE(store.set_if_absent("k", "v", std::nullopt, store::k_plain_step));
  EXPECT_EQ(read_file(path + "/nxlock-store"), "nxlock-store 2\n");
}

TEST_F(FileStoreTest, NewFilesTakeTheStoreDirectorysBits) {
  ASSERT_EQ(::mkdir(store_path().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(store_path().c_str(), 02770), 0);  // a group-shared store
  const mode_t old_umask = ::umask(022);               // would otherwise deny the group
  {
    FileStore store(store_path(), {});
    store.set("k", "v", store::k_plain_step);
  }
  ::umask(old_umask);
  EXPECT_EQ(mode_of(store_path() + "/nxlock-store"), 0660u);
  EXPECT_EQ(mode_of(store_path() + "/data"), 02770u);
  EXPECT_EQ(mode_of(stripe_path("k")), 02770u);
  EXPECT_EQ(mode_of(bucket_path("k")), 0660u);
}

TEST_F(FileStoreTest, RecordsAreExactlyTheDocumentedFormat) {
  FileStore store(store_path(), {});
  store.set("k", "v", store::k_plain_step);
  // The example in docs/STORE-FORMAT.md, byte for byte.
  EXPECT_EQ(read_file(bucket_path("k")),
            std::string("NXLR\x01\0\0\0\x01\0\0\0\x01\0\0\0k\x01\0\0\0v\xaa\x49\xba\x08", 26));
  EXPECT_EQ(read_file(bucket_path("k")), documented_record({{"k", "v"}}));
  EXPECT_TRUE(store.compare_and_delete("k", "v", std::nullopt, store::k_plain_step));
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
    store.set("k", "v", store::k_plain_step);
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
        store.set("k" + std::to_string(i), "v", store::k_plain_step);
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
      {"set_if_absent",
       [](FileStore& s) { s.set_if_absent("k", "2", std::nullopt, store::k_plain_step); }},
      {"get_and_set",
       [](FileStore& s) { s.get_and_set("k", "2", std::nullopt, store::k_plain_step); }},
      {"set", [](FileStore& s) { s.set("k", "2", store::k_plain_step); }},
      {"del", [](FileStore& s) { s.del({"k"}); }},
      {"compare_and_delete",
       [](FileStore& s) {
         s.compare_and_delete("k", "1732000000", std::nullopt, store::k_plain_step);
       }},
      {"compare_and_set",
       [](FileStore& s) {
         s.compare_and_set("k", "1732000000", "2", std::nullopt, store::k_plain_step);
       }},
  };

  FileStore store(store_path(), {});
  store.set("k", "1732000000", store::k_plain_step);
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
  EXPECT_EQ(error_kind([&] { FileStore(store, options).set("k", "v", store::k_plain_step); },
                       &subject, &reason),
            ErrorKind::internal);
  EXPECT_EQ(subject, store);
  EXPECT_EQ(reason, "create store directory: No such file or directory (where it came from)");
  // Without a hint (a store named explicitly), as before.
  EXPECT_EQ(error_kind([&] { FileStore(store, {}).set("k", "v", store::k_plain_step); }, &subject,
                       &reason),
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
    store.set("k", "v", store::k_plain_step);
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
    store.set("k", "v", store::k_plain_step);
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
    if (error_kind([&] { store.set("k", "w", store::k_plain_step); }) != ErrorKind::permission) {
      return 12;
    }
    // Nothing to delete needs no write access at all.
    return store.del({"absent"}) == 0 ? 0 : 13;
  });
  set_modes(fs::perms(0700), fs::perms(0600));
  EXPECT_EQ(status, 0) << "10: could not drop privileges, 11: could not read, 12: not a "
                          "permission error, 13: del failed";
}

}  // namespace
}  // namespace nxlock::testing
