// The embedded store's record format and bucket naming (docs/STORE-FORMAT.md, "Records").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nxlock::store::record {

struct Entry {
  std::string key;
  std::string value;
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

// The bytes of a record holding `entries`. Throws util::Error(usage) for a field
// too large for the format.
std::string encode(const std::vector<Entry>& entries);

// Parses a record that must hold exactly what encode() writes for bucket
// `name`. Throws util::Error(data) "corrupt record (...)" naming `path` otherwise.
std::vector<Entry> parse(std::string_view bytes, const std::string& name, const std::string& path);

}  // namespace nxlock::store::record
