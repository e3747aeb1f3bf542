// CRC-32C against the standard check value and its incremental form.
#include <gtest/gtest.h>

#include <string>

#include "util/crc32c.hpp"

namespace nxlock {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(util::crc32c("123456789"), 0xE3069283u);
}

TEST(Crc32c, EmptyInputIsZero) {
  EXPECT_EQ(util::crc32c(""), 0u);
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, and of 0xFF.
  EXPECT_EQ(util::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(util::crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
}

TEST(Crc32c, ContinuesAcrossPieces) {
  const std::string whole = "The quick brown fox jumps over the lazy dog";
  const std::uint32_t first = util::crc32c(std::string_view(whole).substr(0, 10));
  EXPECT_EQ(util::crc32c(std::string_view(whole).substr(10), first), util::crc32c(whole));
}

}  // namespace
}  // namespace nxlock
