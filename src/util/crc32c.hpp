// CRC-32C (Castagnoli): the checksum that says an embedded-store record is intact.
#pragma once

#include <cstdint>
#include <string_view>

namespace nxlock::util {

// The CRC-32C of `data` (reflected polynomial 0x82F63B78, as in iSCSI and ext4).
// Pass a previous result as `crc` to continue over several pieces.
// crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0);

}  // namespace nxlock::util
