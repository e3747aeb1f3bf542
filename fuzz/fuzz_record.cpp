// libFuzzer target: the embedded store's record parser (store/file/record.hpp).
//
// The record ends in a CRC32C and names its bucket by the hash of each key, so
// random bytes would almost never get past those checks: an input whose first
// byte is odd gets its checksum fixed up and is parsed as the bucket of its
// first key, so that the fuzzer reaches the entry parsing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "store/file/record.hpp"
#include "util/crc32c.hpp"
#include "util/error.hpp"

namespace {

std::uint32_t get_u32(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return v;
}

// The bucket of the record's first key, as well as it can be read; any name otherwise.
std::string first_bucket(const std::string& bytes) {
  constexpr std::size_t k_first_field = 12;
  if (bytes.size() >= k_first_field + 4) {
    const std::size_t length = get_u32(bytes, k_first_field);
    if (length <= bytes.size() - k_first_field - 4) {
      return nxlock::store::record::bucket_file_name(
          std::string_view(bytes).substr(k_first_field + 4, length));
    }
  }
  return "0000000000000000";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const bool fix_up = (data[0] & 1) != 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (fix_up && bytes.size() >= 4) {
    const std::uint32_t crc =
        nxlock::util::crc32c(std::string_view(bytes).substr(0, bytes.size() - 4));
    for (std::size_t i = 0; i < 4; ++i) {
      bytes[bytes.size() - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
    }
  }
  const std::string name = fix_up ? first_bucket(bytes) : "0000000000000000";
  try {
    const auto entries = nxlock::store::record::parse(bytes, name, "fuzz");
    // What parses is exactly what the writer would have written.
    if (nxlock::store::record::encode(entries) != bytes) {
      std::abort();
    }
  } catch (const nxlock::util::Error& error) {
    if (error.kind() != nxlock::util::ErrorKind::data) {
      std::abort();
    }
  }
  return 0;
}
