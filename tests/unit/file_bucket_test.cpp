// FileStore's buckets (store/file/bucket.cpp): what is planted where a stripe or a bucket
// should be (symlinks, a FIFO, a stale temporary file), and keys that share one bucket.
#include "unit/file_store_fixture.hpp"

namespace nxlock::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::FileStore;
using store::WaitResult;
using util::ErrorKind;

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
  store.set("other", "x", store::k_plain_step);  // makes data/
  fs::create_directories(store_path() + "/data");
  ASSERT_NE(fnv1a64_hex("other").substr(0, 2), fnv1a64_hex("k").substr(0, 2));
  ASSERT_EQ(::symlink(target.c_str(), stripe_path("k").c_str()), 0);

  EXPECT_EQ(error_kind([&] { store.get("k"); }), ErrorKind::data);
  EXPECT_EQ(error_kind([&] { store.set("k", "v", store::k_plain_step); }), ErrorKind::data);
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
           [&] { store.get("k"); }, [&] { store.set("k", "v", store::k_plain_step); },
           [&] { store.get_and_set("k", "v", std::nullopt, store::k_plain_step); },
           [&] { store.del({"k"}); },
           [&] {
             store.compare_and_delete("k", "someone else's", std::nullopt, store::k_plain_step);
           }}) {
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
  EXPECT_EQ(error_kind([&] { store.set("k", "v", store::k_plain_step); }), ErrorKind::data);
}

TEST_F(FileStoreTest, AStaleTemporaryFileDoesNotMatter) {
  create_store();
  FileStore store(store_path(), {});
  fs::create_directories(stripe_path("k"));
  const std::string temp = stripe_path("k") + "/." + fnv1a64_hex("k") + ".tmp";
  write_file(temp, "half a record from a writer that was killed");
  const std::string elsewhere = m_dir.path() + "/elsewhere";
  write_file(elsewhere, "precious");
  EXPECT_TRUE(store.set_if_absent("k", "v", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store.get("k"), "v");
  // Even a link planted at the temporary name is replaced, not written through.
  ASSERT_EQ(::symlink(elsewhere.c_str(), temp.c_str()), 0);
  store.set("k", "w", store::k_plain_step);
  EXPECT_EQ(store.get("k"), "w");
  EXPECT_EQ(read_file(elsewhere), "precious");
}

// ---- hash collisions -------------------------------------------------------------

TEST_F(FileStoreTest, CollidingKeysShareOneBucket) {
  // A real FNV-1a 64 collision, found with a Pollard-rho search.
  const std::string a = "95625d3408faf04c";
  const std::string b = "389a3fbdf5c85d1b";
  ASSERT_EQ(fnv1a64_hex(a), fnv1a64_hex(b));
  FileStore store(store_path(), {});

  EXPECT_TRUE(store.set_if_absent(a, "A", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store.get(b), std::nullopt);
  EXPECT_TRUE(store.set_if_absent(b, "B", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(store.set_if_absent(a, "again", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(store.set_if_absent(b, "again", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store.get(a), "A");
  EXPECT_EQ(store.get(b), "B");
  EXPECT_EQ(read_file(bucket_path(a)), documented_record({{a, "A"}, {b, "B"}}));

  EXPECT_EQ(store.get_and_set(a, "A2", std::nullopt, store::k_plain_step).old, "A");
  EXPECT_TRUE(store.compare_and_set(b, "B", "B2", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(store.compare_and_delete(a, "B2", std::nullopt, store::k_plain_step));
  EXPECT_EQ(store.del({a}), 1u);
  EXPECT_EQ(store.get(a), std::nullopt);
  EXPECT_EQ(store.get(b), "B2");
  EXPECT_EQ(read_file(bucket_path(a)), documented_record({{b, "B2"}}));
  EXPECT_TRUE(store.compare_and_delete(b, "B2", std::nullopt, store::k_plain_step));
  EXPECT_FALSE(fs::exists(bucket_path(a)));
}

}  // namespace
}  // namespace nxlock::testing
