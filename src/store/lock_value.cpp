// The lock value and fencing counter formats, shared by the stores and the lock layer.
#include "store/lock_value.hpp"

#include <charconv>
#include <limits>

#include "util/error.hpp"

namespace nxlock::store {

std::optional<std::int64_t> parse_lock_timestamp(std::string_view text) {
  std::int64_t value = 0;
  // 18 digits always fit in 63 bits. Redis's script applies the same rule
  // (redis_store.cpp): both sides of a fenced GETSET must agree on it.
  if (text.empty() || text.size() > 18 || text[0] == '-' || text[0] == '+') {
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

bool getset_owns(const std::optional<std::string>& old, std::int64_t now_seconds) {
  if (!old) {
    return true;
  }
  const auto timestamp = parse_lock_timestamp(*old);
  return timestamp && *timestamp < now_seconds;
}

std::optional<std::int64_t> parse_fence(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::int64_t next_fence(const std::string* current, std::string_view counter_key) {
  if (current == nullptr) {
    return 1;
  }
  const auto value = parse_fence(*current);
  if (!value || *value == std::numeric_limits<std::int64_t>::max()) {
    throw util::Error(util::ErrorKind::data, "fencing counter '" + std::string(counter_key) + "'",
                      "does not hold an integer below 2^63 (it is nxlock's; set it back to a "
                      "number at least as high as it was)");
  }
  return *value + 1;
}

}  // namespace nxlock::store
