// The embedded store's record format: length-prefixed entries under a header and a CRC32C
// (docs/STORE-FORMAT.md, "Records"); nothing here touches a file.
#include "store/file/record.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "util/crc32c.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store::record {

namespace {

using util::ErrorKind;

constexpr std::string_view k_record_magic = "NXLR";
constexpr std::uint8_t k_plain_version = 1;  // key and value per entry
constexpr std::uint8_t k_fenced_version = 2;  // and the entry's metadata (a lock's token, owner)
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

template <typename Int>
bool parse_int(std::string_view text, Int& out) {
  if (text.empty() || text[0] == '+' || (text.size() > 1 && text[0] == '0')) {
    return false;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool boot_id_ok(std::string_view boot) {
  return !boot.empty() && boot.size() <= 64 &&
         std::all_of(boot.begin(), boot.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
         });
}

// An entry's metadata: "" (none), or "fence=N", then " until=T" and
// " owner=PID:START:BOOT_ID" where there are.
std::string encode_meta(const Entry& entry) {
  if (!entry.fence) {
    return {};
  }
  std::string meta = "fence=" + std::to_string(*entry.fence);
  if (entry.until) {
    meta += " until=" + std::to_string(*entry.until);
  }
  if (entry.owner) {
    meta += " owner=" + std::to_string(entry.owner->pid) + ":" +
            std::to_string(entry.owner->start) + ":" + entry.owner->boot;
  }
  return meta;
}

// False if `meta` is not exactly what encode_meta() writes.
bool parse_meta(std::string_view meta, Entry& entry) {
  if (meta.empty()) {
    return true;
  }
  if (!meta.starts_with("fence=")) {
    return false;
  }
  meta.remove_prefix(6);
  const auto space = meta.find(' ');
  std::int64_t fence = 0;
  if (!parse_int(meta.substr(0, space), fence) || fence <= 0) {
    return false;
  }
  entry.fence = fence;
  if (space == std::string_view::npos) {
    return true;
  }
  std::string_view owner = meta.substr(space + 1);
  if (owner.starts_with("until=")) {
    owner.remove_prefix(6);
    const auto next = owner.find(' ');
    std::int64_t until = 0;
    if (!parse_int(owner.substr(0, next), until) || until < 0) {
      return false;
    }
    entry.until = until;
    if (next == std::string_view::npos) {
      return true;
    }
    owner.remove_prefix(next + 1);
  }
  if (!owner.starts_with("owner=")) {
    return false;
  }
  owner.remove_prefix(6);
  const auto first = owner.find(':');
  const auto second = first == std::string_view::npos ? first : owner.find(':', first + 1);
  if (second == std::string_view::npos) {
    return false;
  }
  Owner parsed;
  parsed.boot = std::string(owner.substr(second + 1));
  if (!parse_int(owner.substr(0, first), parsed.pid) || parsed.pid <= 0 ||
      !parse_int(owner.substr(first + 1, second - first - 1), parsed.start) ||
      !boot_id_ok(parsed.boot)) {
    return false;
  }
  entry.owner = std::move(parsed);
  return true;
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
  const bool fenced = std::any_of(entries.begin(), entries.end(),
                                  [](const Entry& e) { return e.fence.has_value(); });
  std::string out;
  out.append(k_record_magic);
  out.push_back(static_cast<char>(fenced ? k_fenced_version : k_plain_version));
  out.append(3, '\0');
  put_u32(out, length_u32(entries.size(), "bucket"));
  for (const auto& entry : entries) {
    put_u32(out, length_u32(entry.key.size(), "key"));
    out.append(entry.key);
    put_u32(out, length_u32(entry.value.size(), "value"));
    out.append(entry.value);
    if (fenced) {
      const std::string meta = encode_meta(entry);
      put_u32(out, length_u32(meta.size(), "metadata"));
      out.append(meta);
    }
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
  const auto version = static_cast<unsigned char>(bytes[4]);
  if (version != k_plain_version && version != k_fenced_version) {
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
    Entry entry{std::move(key), std::move(value), {}, {}};
    if (version == k_fenced_version && !parse_meta(field(i), entry)) {
      corrupt(path, "entry " + std::to_string(i) + " has bad metadata");
    }
    if (bucket_file_name(entry.key) != name) {
      corrupt(path, "entry " + std::to_string(i) + " does not belong in this bucket");
    }
    for (const auto& earlier : entries) {
      if (earlier.key == entry.key) {
        corrupt(path, "duplicate key");
      }
    }
    entries.push_back(std::move(entry));
  }
  if (at != body.size()) {
    corrupt(path, "trailing bytes");
  }
  // The writer marks a record 2 only for a fenced entry: what it would never
  // write is not read as valid either.
  if (version == k_fenced_version &&
      std::none_of(entries.begin(), entries.end(), [](const Entry& e) { return e.fence; })) {
    corrupt(path, "version 2 without a fenced entry");
  }
  return entries;
}

}  // namespace nxlock::store::record
