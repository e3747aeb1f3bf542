// The embedded store's record format and bucket naming (docs/STORE-FORMAT.md, "Records").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nxlock::store::record {

// The process that wrote a lock: alive while this pid still runs the process
// that started at `start` (clock ticks after boot) on the boot `boot`.
struct Owner {
  std::int64_t pid = 0;
  std::uint64_t start = 0;
  std::string boot;  // /proc/sys/kernel/random/boot_id

  bool operator==(const Owner&) const = default;
};

// A key and its value; a lock written by an owning step also carries its
// fencing token and its owner (version 2 records). GET returns the value alone.
struct Entry {
  Entry() = default;
  Entry(std::string k, std::string v, std::optional<std::int64_t> f = {},
        std::optional<Owner> o = {})
      : key(std::move(k)), value(std::move(v)), fence(f), owner(std::move(o)) {}

  std::string key;
  std::string value;
  std::optional<std::int64_t> fence;
  std::optional<Owner> owner;
  // Details nxlock wrote beside its own lock (its holder record): the lock's
  // expiry as it was then, and `fence` its token. Gone with an expired lock.
  std::optional<std::int64_t> until;
};

// Where a key lives: STORE/data/<stripe>/<name>.
struct Bucket {
  std::string stripe;  // the first two hex digits of name: one of 256 lock stripes
  std::string name;    // FNV-1a 64 of the key, 16 lowercase hex digits
};

// The bucket file name a key lives in: FNV-1a 64 of the key, 16 hex digits.
std::string bucket_file_name(std::string_view key);

// The stripe and bucket file name of a key.
Bucket bucket_of(std::string_view key);

// The bytes of a record holding `entries`: version 1 when no entry carries a
// token, else version 2. Throws util::Error(usage) for a field
// too large for the format.
std::string encode(const std::vector<Entry>& entries);

// Parses a record (version 1 or 2) that must hold exactly what encode() writes for bucket
// `name`. Throws util::Error(data) "corrupt record (...)" naming `path` otherwise.
std::vector<Entry> parse(std::string_view bytes, const std::string& name, const std::string& path);

}  // namespace nxlock::store::record
