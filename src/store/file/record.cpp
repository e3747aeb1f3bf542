// The embedded store's record format: length-prefixed entries under a header and a CRC32C
// (docs/STORE-FORMAT.md, "Records"); nothing here touches a file.
#include "store/file/record.hpp"

#include <algorithm>
#include <cstdint>

#include "util/crc32c.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store::record {

namespace {

using util::ErrorKind;

constexpr std::string_view k_record_magic = "NXLR";
constexpr std::uint8_t k_record_version = 1;
constexpr std::size_t k_header_size = 12;  // magic, version, 3 reserved bytes, entry count
constexpr std::size_t k_checksum_size = 4;

[[noreturn]] void corrupt(const std::string& path, const std::string& which) {
  throw util::Error(ErrorKind::data, util::escape(path), "corrupt record (" + which + ")");
}

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3;
  }
  return hash;
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}

std::uint32_t get_u32(std::string_view bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return v;
}

std::uint32_t length_u32(std::size_t size, std::string_view what) {
  if (size > UINT32_MAX) {
    throw util::Error(ErrorKind::usage, std::string(what),
                      "too large for the embedded store (at most 4 GiB)");
  }
  return static_cast<std::uint32_t>(size);
}

}  // namespace

std::string bucket_file_name(std::string_view key) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::uint64_t hash = fnv1a64(key);
  std::string name(16, '0');
  for (int i = 15; i >= 0; --i) {
    name[static_cast<std::size_t>(i)] = k_digits[hash & 0xF];
    hash >>= 4;
  }
  return name;
}

Bucket bucket_of(std::string_view key) {
  std::string name = bucket_file_name(key);
  return {name.substr(0, 2), std::move(name)};
}

std::string encode(const std::vector<Entry>& entries) {
  std::string out;
  out.append(k_record_magic);
  out.push_back(static_cast<char>(k_record_version));
  out.append(3, '\0');
  put_u32(out, length_u32(entries.size(), "bucket"));
  for (const auto& entry : entries) {
    put_u32(out, length_u32(entry.key.size(), "key"));
    out.append(entry.key);
    put_u32(out, length_u32(entry.value.size(), "value"));
    out.append(entry.value);
  }
  put_u32(out, util::crc32c(out));
  return out;
}

std::vector<Entry> parse(std::string_view bytes, const std::string& name, const std::string& path) {
  if (bytes.size() < k_header_size + k_checksum_size) {
    corrupt(path, "shorter than a header");
  }
  if (bytes.substr(0, 4) != k_record_magic) {
    corrupt(path, "bad magic");
  }
  if (static_cast<unsigned char>(bytes[4]) != k_record_version) {
    corrupt(path, "unknown version " + std::to_string(static_cast<unsigned char>(bytes[4])));
  }
  if (bytes[5] != '\0' || bytes[6] != '\0' || bytes[7] != '\0') {
    corrupt(path, "nonzero reserved bytes");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - k_checksum_size);
  if (util::crc32c(body) != get_u32(bytes, body.size())) {
    corrupt(path, "checksum mismatch");
  }
  const std::uint32_t count = get_u32(bytes, 8);
  if (count == 0) {
    corrupt(path, "no entries");
  }

  std::size_t at = k_header_size;
  // Reads one length-prefixed field, refusing lengths that overrun the body.
  auto field = [&](std::uint32_t index) {
    if (body.size() - at < 4 || body.size() - at - 4 < get_u32(body, at)) {
      corrupt(path, "entry " + std::to_string(index) + " overruns the record");
    }
    const std::size_t length = get_u32(body, at);
    const std::string_view value = body.substr(at + 4, length);
    at += 4 + length;
    return std::string(value);
  };
  std::vector<Entry> entries;
  // Each entry takes at least 8 bytes: never trust `count` for a huge reservation.
  entries.reserve(std::min<std::size_t>(count, body.size() / 8));
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string key = field(i);
    std::string value = field(i);
    if (bucket_file_name(key) != name) {
      corrupt(path, "entry " + std::to_string(i) + " does not belong in this bucket");
    }
    for (const auto& earlier : entries) {
      if (earlier.key == key) {
        corrupt(path, "duplicate key");
      }
    }
    entries.push_back({std::move(key), std::move(value)});
  }
  if (at != body.size()) {
    corrupt(path, "trailing bytes");
  }
  return entries;
}

}  // namespace nxlock::store::record
