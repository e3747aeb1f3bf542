// The fenced steps' decisions shared by the embedded store and the memory store.
#include "store/fenced_steps.hpp"

#include <algorithm>
#include <limits>

#include "store/lock_value.hpp"
#include "util/error.hpp"

namespace nxlock::store {

std::optional<std::int64_t> next_token(std::optional<std::int64_t> last, std::int64_t floor) {
  if (!last) {
    return std::max<std::int64_t>(1, floor);
  }
  if (*last == std::numeric_limits<std::int64_t>::max()) {
    return std::nullopt;
  }
  return std::max(*last + 1, floor);
}

std::optional<std::int64_t> counter_token(const std::optional<std::string>& text,
                                          std::string_view counter) {
  if (!text) {
    return std::nullopt;
  }
  const auto value = parse_fence(*text);
  if (!value || *value == std::numeric_limits<std::int64_t>::max()) {
    throw util::Error(util::ErrorKind::data, "fencing counter '" + std::string(counter) + "'",
                      "does not hold an integer below 2^63 (it is nxlock's; set it back to a "
                      "number at least as high as it was)");
  }
  return value;
}

bool counter_holds(std::optional<std::int64_t> counter, std::int64_t token) {
  return !counter || *counter == token;
}

bool getset_owns(const std::optional<std::string>& old, std::int64_t now_seconds) {
  if (!old) {
    return true;
  }
  const auto timestamp = parse_lock_timestamp(*old);
  return timestamp && *timestamp < now_seconds;
}

}  // namespace nxlock::store
