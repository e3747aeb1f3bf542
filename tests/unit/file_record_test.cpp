// The embedded store's record format on its own (store/file/record.hpp), against
// docs/STORE-FORMAT.md: no store directory, no files.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "store/file/record.hpp"
#include "util/crc32c.hpp"
#include "util/error.hpp"

namespace nxlock::store::record {
namespace {

using util::ErrorKind;

// The example in docs/STORE-FORMAT.md, byte for byte.
const std::string k_documented_kv("NXLR\x01\0\0\0\x01\0\0\0\x01\0\0\0k\x01\0\0\0v\xaa\x49\xba\x08",
                                  26);

// A real FNV-1a 64 collision (also in file_store_test.cpp).
const std::string k_collide_a = "95625d3408faf04c";
const std::string k_collide_b = "389a3fbdf5c85d1b";

void put_u32(std::string& out, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) {
    out[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  }
}

// Recomputes the trailing checksum, so a test reaches the check after it.
std::string with_crc(std::string bytes) {
  put_u32(bytes, bytes.size() - 4,
          util::crc32c(std::string_view(bytes).substr(0, bytes.size() - 4)));
  return bytes;
}

// The text of the data error parse() throws, or "" if it accepts the bytes.
std::string refusal(const std::string& bytes, const std::string& name = bucket_file_name("k")) {
  try {
    parse(bytes, name, "/s/data/xx/bucket");
  } catch (const util::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::data);
    EXPECT_EQ(e.subject(), "/s/data/xx/bucket");
    return e.what();
  }
  return "";
}

TEST(FileRecord, BucketNamesAreTheDocumentedHash) {
  EXPECT_EQ(bucket_file_name(""), "cbf29ce484222325");
  EXPECT_EQ(bucket_file_name("a"), "af63dc4c8601ec8c");
  const Bucket bucket = bucket_of("a");
  EXPECT_EQ(bucket.stripe, "af");
  EXPECT_EQ(bucket.name, "af63dc4c8601ec8c");
  EXPECT_EQ(bucket_file_name(k_collide_a), bucket_file_name(k_collide_b));
}

TEST(FileRecord, EncodesTheDocumentedExample) {
  EXPECT_EQ(encode({{"k", "v"}}), k_documented_kv);
}

TEST(FileRecord, RoundTripsArbitraryBytes) {
  const std::vector<std::vector<Entry>> cases = {
      {{"k", "v"}},
      {{"", ""}},
      {{std::string("a\0b\nc", 5), std::string(1000, '\xff')}},
      {{std::string(1000, 'x'), "1763800000"}},
      {{k_collide_a, "A"}, {k_collide_b, "B"}},
  };
  for (const auto& entries : cases) {
    const std::string bytes = encode(entries);
    const auto parsed = parse(bytes, bucket_file_name(entries.front().key), "p");
    ASSERT_EQ(parsed.size(), entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(parsed[i].key, entries[i].key);
      EXPECT_EQ(parsed[i].value, entries[i].value);
    }
    EXPECT_EQ(encode(parsed), bytes);
  }
}

TEST(FileRecord, EveryTruncationIsRefused) {
  const std::string whole = encode({{k_collide_a, "A"}, {k_collide_b, "B"}});
  const std::string name = bucket_file_name(k_collide_a);
  ASSERT_EQ(refusal(whole, name), "");
  for (std::size_t size = 0; size < whole.size(); ++size) {
    EXPECT_NE(refusal(whole.substr(0, size), name), "") << "truncated to " << size;
  }
}

// Version 2: a lock's token and owner beside its value; version 1 records, with
// no entry carrying one, are still what encode() writes and parse() reads.
TEST(FileRecord, ALocksTokenAndOwnerMakeAVersion2Record) {
  const Owner owner{4242, 987654321, "0b6a4c1e-2f3d-4e5f-8a9b-0c1d2e3f4a5b"};
  const std::vector<Entry> entries = {{k_collide_a, "1763800000", 1763799999123456, owner},
                                      {k_collide_b, "plain"},
                                      {std::string(k_collide_a).append(""), "x"}};
  const std::string bytes = encode({entries[0], entries[1]});
  EXPECT_EQ(bytes[4], 2);
  // The documented layout: after each value, its metadata's length and text.
  const std::string meta = "fence=1763799999123456 owner=4242:987654321:" + owner.boot;
  EXPECT_NE(bytes.find(meta), std::string::npos);
  const auto parsed = parse(bytes, bucket_file_name(k_collide_a), "p");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].value, "1763800000");
  EXPECT_EQ(parsed[0].fence, 1763799999123456);
  EXPECT_EQ(parsed[0].owner, owner);
  EXPECT_EQ(parsed[1].fence, std::nullopt);
  EXPECT_EQ(parsed[1].owner, std::nullopt);
  EXPECT_EQ(encode(parsed), bytes);
  // A token without an owner (a process /proc could not name).
  const auto bare = parse(encode({{"k", "v", 7}}), bucket_file_name("k"), "p");
  EXPECT_EQ(bare[0].fence, 7);
  EXPECT_EQ(bare[0].owner, std::nullopt);
  EXPECT_EQ(encode({{"k", "v"}}), k_documented_kv);  // no token: still version 1
}

TEST(FileRecord, BadMetadataIsRefused) {
  const std::string name = bucket_file_name("k");
  const std::string good = encode({{"k", "v", 7}});
  for (const std::string meta :
       {"fence=", "fence=0", "fence=-1", "fence=07", "fence=x", "fence=7 ", "fence=7 owner=",
        "fence=7 owner=1:2", "fence=7 owner=1:2:", "fence=7 owner=0:2:ab", "fence=7 owner=1:2:AB",
        "fence=7 owner=1:2:a/b", "owner=1:2:ab", "fence=7 pid=1"}) {
    // The same record with this metadata in place of "fence=7".
    std::string bytes = good;
    const auto at = bytes.find("fence=7");
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, 7, meta);
    put_u32(bytes, at - 4, static_cast<std::uint32_t>(meta.size()));
    EXPECT_NE(refusal(with_crc(bytes), name).find("corrupt record (entry 0 has bad metadata"),
              std::string::npos)
        << meta;
  }
}

// encode() marks a record 2 only for a fenced entry; a record 2 with none is
// one it never writes, and reading it as valid would break the round trip.
TEST(FileRecord, AVersion2RecordWithoutAFencedEntryIsRefused) {
  const std::string name = bucket_file_name("k");
  std::string bytes = encode({{"k", "v", 7}});
  const auto at = bytes.find("fence=7");
  ASSERT_NE(at, std::string::npos);
  bytes.erase(at, 7);
  put_u32(bytes, at - 4, 0);
  EXPECT_NE(refusal(with_crc(bytes), name).find("version 2 without a fenced entry"),
            std::string::npos);
}

TEST(FileRecord, EveryFlippedBitIsRefused) {
  const std::string name = bucket_file_name("k");
  for (std::size_t at = 0; at < k_documented_kv.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = k_documented_kv;
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
      EXPECT_NE(refusal(bytes, name), "") << "byte " << at << " bit " << bit;
    }
  }
}

TEST(FileRecord, NamesEachCheck) {
  auto expect_refused = [](const std::string& bytes, const std::string& which,
                           const std::string& name = bucket_file_name("k")) {
    EXPECT_NE(refusal(bytes, name).find("corrupt record (" + which), std::string::npos)
        << which << ": " << refusal(bytes, name);
  };
  expect_refused("NXLR", "shorter than a header");
  std::string bad = k_documented_kv;
  bad[0] = 'X';
  expect_refused(with_crc(bad), "bad magic");
  bad = k_documented_kv;
  bad[4] = 3;
  expect_refused(with_crc(bad), "unknown version 3");
  bad = k_documented_kv;
  bad[6] = 1;
  expect_refused(with_crc(bad), "nonzero reserved bytes");
  bad = k_documented_kv;
  bad[21] = 'w';  // the value byte, checksum left alone
  expect_refused(bad, "checksum mismatch");
  bad = k_documented_kv;
  put_u32(bad, 8, 0);
  expect_refused(with_crc(bad), "no entries");
  bad = k_documented_kv;
  put_u32(bad, 8, 2);
  expect_refused(with_crc(bad), "entry 1 overruns the record");
  bad = k_documented_kv;
  put_u32(bad, 17, 0xFFFFFFFF);  // the value length
  expect_refused(with_crc(bad), "entry 0 overruns the record");
  bad = k_documented_kv;
  bad.insert(22, "!");
  expect_refused(with_crc(bad), "trailing bytes");
  expect_refused(k_documented_kv, "entry 0 does not belong in this bucket",
                 bucket_file_name("other"));
  const std::string twice = with_crc(encode({{k_collide_a, "A"}, {k_collide_a, "B"}}));
  expect_refused(twice, "duplicate key", bucket_file_name(k_collide_a));
}

}  // namespace
}  // namespace nxlock::store::record
