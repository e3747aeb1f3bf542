// CRC-32C (Castagnoli), table-driven: records are small, so one table lookup per byte is plenty.
#include "util/crc32c.hpp"

#include <array>

namespace nxlock::util {

namespace {
constexpr std::uint32_t k_polynomial = 0x82F63B78;  // 0x1EDC6F41 bit-reversed

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) != 0 ? (crc >> 1) ^ k_polynomial : crc >> 1;
    }
    table[i] = crc;
  }
  return table;
}

constexpr auto k_table = make_table();
}  // namespace

std::uint32_t crc32c(std::string_view data, std::uint32_t crc) {
  crc = ~crc;
  for (const char c : data) {
    crc = k_table[(crc ^ static_cast<unsigned char>(c)) & 0xFF] ^ (crc >> 8);
  }
  return ~crc;
}

}  // namespace nxlock::util
