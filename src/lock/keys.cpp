// Companion keys beside a lock: injective names in the lock key's Redis Cluster hash slot.
#include "lock/keys.hpp"

#include <array>
#include <optional>

#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::lock {

namespace {

// Every suffix nxlock uses; "lease" is the Redis queue's own companion.
constexpr std::array<std::string_view, 5> k_suffixes = {"fence", "holder", "queue", "lease",
                                                        "shared"};

// The Cluster specification's rule: the text between the first '{' and the
// first '}' after it, if there is at least one byte between them.
std::optional<std::string_view> hash_tag(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) {
    return std::nullopt;
  }
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) {
    return std::nullopt;
  }
  return key.substr(open + 1, close - open - 1);
}

}  // namespace

std::string companion_key(std::string_view key, std::string_view suffix) {
  std::string out;
  out.reserve(2 * key.size() + suffix.size() + 4);
  const std::string_view tag = hash_tag(key).value_or(key);
  if (tag.find('}') == std::string_view::npos) {
    out += '{';
    out += tag;
    out += "}:";
  } else {
    out += '}';  // no tag and a '}': see keys.hpp
  }
  out += suffix;
  out += ':';
  out += key;
  return out;
}

std::string fence_key(std::string_view key) {
  return companion_key(key, "fence");
}

std::string queue_key(std::string_view key) {
  return companion_key(key, "queue");
}

std::string shared_key(std::string_view key) {
  return companion_key(key, "shared");
}

std::string details_key(std::string_view leases) {
  return companion_key(leases, "holder");
}

bool is_companion_key(std::string_view name) {
  // Parse as companion_key writes, then check that it writes exactly this.
  std::string_view rest;
  if (name.starts_with('{')) {
    const auto close = name.find('}');
    if (close == std::string_view::npos || name.substr(close + 1, 1) != ":") {
      return false;
    }
    rest = name.substr(close + 2);
  } else if (name.starts_with('}')) {
    rest = name.substr(1);
  } else {
    return false;
  }
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos) {
    return false;
  }
  const std::string_view suffix = rest.substr(0, colon);
  for (const auto known : k_suffixes) {
    if (suffix == known) {
      return companion_key(rest.substr(colon + 1), suffix) == name;
    }
  }
  return false;
}

std::optional<SlotOf> slot_of(std::string_view lock_key) {
  // After the tag ("{TAG}:") or the '}' of the untagged form: "slotN:KEY".
  std::size_t at = 0;
  if (lock_key.starts_with('{')) {
    at = lock_key.find("}:");
    at = at == std::string_view::npos ? at : at + 2;
  } else if (lock_key.starts_with('}')) {
    at = 1;
  } else {
    return std::nullopt;
  }
  if (at == std::string_view::npos || !lock_key.substr(at).starts_with("slot")) {
    return std::nullopt;
  }
  const std::size_t digits = at + 4;
  const std::size_t colon = lock_key.find(':', digits);
  const std::string_view number = lock_key.substr(digits, colon - digits);
  if (colon == std::string_view::npos || number.empty() || number.size() > 9 ||
      number.find_first_not_of("0123456789") != std::string_view::npos ||
      (number.size() > 1 && number[0] == '0')) {
    return std::nullopt;
  }
  SlotOf slot{std::string(lock_key.substr(colon + 1)), std::stoi(std::string(number))};
  // Only the name companion_key writes: "{x}:slot1:y" is no slot of "y".
  if (companion_key(slot.key, lock_key.substr(at, colon - at)) != lock_key) {
    return std::nullopt;
  }
  return slot;
}

void check_lock_key(std::string_view key) {
  if (is_companion_key(key)) {
    throw util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'",
                      "this name is another lock's companion key (its fencing counter, holder "
                      "details, queue or shared leases); name the lock otherwise");
  }
}

}  // namespace nxlock::lock
