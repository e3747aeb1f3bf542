// nxlock doctor's pure decisions: file system kinds, and what a list of checks adds up to.
#include "store/diagnosis.hpp"

#include <gtest/gtest.h>

namespace nxlock::store {
namespace {

TEST(ClassifyFileSystem, LocalOnesAreNamed) {
  EXPECT_EQ(classify_file_system(0xEF53).name, "ext4");
  EXPECT_FALSE(classify_file_system(0xEF53).network);
  EXPECT_EQ(classify_file_system(0x58465342).name, "xfs");
  EXPECT_EQ(classify_file_system(0x01021994).name, "tmpfs");
  EXPECT_FALSE(classify_file_system(0x01021994).network);
}

TEST(ClassifyFileSystem, NetworkOnesAreFlagged) {
  for (const long long magic :
       {0x6969LL, 0x517BLL, 0xFE534D42LL, 0xFF534D42LL, 0x65735546LL, 0x00C36400LL}) {
    EXPECT_TRUE(classify_file_system(magic).network) << std::hex << magic;
  }
  EXPECT_EQ(classify_file_system(0x6969).name, "nfs");
  EXPECT_EQ(classify_file_system(0xFF534D42).name, "cifs");
}

TEST(ClassifyFileSystem, AMagicSignExtendedByTheAbiStillMatches) {
  // CIFS's magic has its top bit set: a signed 32-bit f_type widens it negative.
  const long long widened = static_cast<long long>(static_cast<int>(0xFF534D42U));
  EXPECT_EQ(classify_file_system(widened).name, "cifs");
}

TEST(ClassifyFileSystem, AnUnknownOneIsShownInHexAndNotFlagged) {
  const FileSystemKind kind = classify_file_system(0x1234ABCD);
  EXPECT_EQ(kind.name, "0x1234abcd");
  EXPECT_FALSE(kind.network);
}

TEST(Diagnosis, FitUnlessACheckFails) {
  Diagnosis diagnosis;
  EXPECT_TRUE(diagnosis.fit());
  diagnosis.checks.push_back(Check::ok("clock", "0.1 ms"));
  diagnosis.checks.push_back(Check::warn("persistence", "none", "set appendonly yes"));
  EXPECT_TRUE(diagnosis.fit());
  EXPECT_EQ(diagnosis.stopped(), nullptr);
  diagnosis.checks.push_back(Check::fail("maxmemory-policy", "allkeys-lru", "noeviction"));
  EXPECT_FALSE(diagnosis.fit());
  EXPECT_EQ(diagnosis.stopped(), nullptr);
}

TEST(Diagnosis, TheFirstStoppingFailIsTheOneReported) {
  Diagnosis diagnosis;
  diagnosis.checks.push_back(Check::ok("reachable", "127.0.0.1:6379"));
  diagnosis.checks.push_back(
      Check::stopping(util::ErrorKind::permission, "auth", "WRONGPASS", "check the password"));
  ASSERT_NE(diagnosis.stopped(), nullptr);
  EXPECT_EQ(diagnosis.stopped()->name, "auth");
  EXPECT_EQ(*diagnosis.stopped()->stop, util::ErrorKind::permission);
  EXPECT_FALSE(diagnosis.fit());
}

TEST(Diagnosis, VerdictNames) {
  EXPECT_EQ(verdict_name(Check::Verdict::ok), "ok");
  EXPECT_EQ(verdict_name(Check::Verdict::warn), "warn");
  EXPECT_EQ(verdict_name(Check::Verdict::fail), "fail");
}

}  // namespace
}  // namespace nxlock::store
