// The lock value and fencing counter formats, shared by the stores and the lock layer.
#include "store/lock_value.hpp"

#include <charconv>

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

std::optional<std::int64_t> parse_fence(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace nxlock::store
