// etcd_json: what etcd's JSON gateway does to values: bytes as base64, int64 as strings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nxlock::store::etcd {

std::string base64_encode(std::string_view bytes);
// nullopt if `text` is not base64 (standard alphabet, padded or not).
std::optional<std::string> base64_decode(std::string_view text);

// The int64 field `name` of `object` (a string, as the gateway sends int64, or a
// number; a uint64 id keeps its bits); 0 when absent, as proto3 leaves out zeros. Throws util::Error
// (internal, "unexpected answer") naming `what` if it is neither.
std::int64_t int_field(const nlohmann::json& object, std::string_view name, std::string_view what);

// The bytes field `name` of `object`, decoded; empty when absent. Throws as int_field.
std::string bytes_field(const nlohmann::json& object, std::string_view name, std::string_view what);

// The key just past every key that starts with `prefix` (range_end of a prefix range).
std::string prefix_end(std::string_view prefix);

}  // namespace nxlock::store::etcd
