// Companion keys beside a lock: injective names in the lock key's Redis Cluster hash slot.
#include "store/keys.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>

#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

namespace {

// Every suffix nxlock uses; "lease" is the Redis queue's own companion.
constexpr std::array<std::string_view, 6> k_suffixes = {"fence", "holder", "queue",
                                                        "lease", "shared", "replace"};
// A semaphore's slots (slot_key()): this prefix and the slot's number.
constexpr std::string_view k_slot_prefix = "slot";

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

// "slot" and one or more digits: any slot (slot_of() reads only the ones
// slot_key() writes, but none of the others may name a lock either).
bool is_slot_suffix(std::string_view suffix) {
  return suffix.size() > k_slot_prefix.size() && suffix.starts_with(k_slot_prefix) &&
         std::all_of(suffix.begin() + static_cast<std::ptrdiff_t>(k_slot_prefix.size()),
                     suffix.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The suffix and key a name is made of, if it is exactly what companion_key()
// writes for them.
struct CompanionParts {
  std::string_view suffix;
  std::string_view key;
};

std::optional<CompanionParts> companion_parts(std::string_view name) {
  // Parse as companion_key writes, then check that it writes exactly this.
  std::string_view rest;
  if (name.starts_with('{')) {
    const auto close = name.find('}');
    if (close == std::string_view::npos || name.substr(close + 1, 1) != ":") {
      return std::nullopt;
    }
    rest = name.substr(close + 2);
  } else if (name.starts_with('}')) {
    rest = name.substr(1);
  } else {
    return std::nullopt;
  }
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  const CompanionParts parts{rest.substr(0, colon), rest.substr(colon + 1)};
  if (companion_key(parts.key, parts.suffix) != name) {
    return std::nullopt;
  }
  return parts;
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

std::string holder_key(std::string_view key) {
  return companion_key(key, "holder");
}

std::string queue_lease_key(std::string_view queue) {
  return companion_key(queue, "lease");
}

std::string fence_key(std::string_view key) {
  return companion_key(key, "fence");
}

std::string replace_key(std::string_view key) {
  return companion_key(key, "replace");
}

std::string shared_key(std::string_view key) {
  return companion_key(key, "shared");
}

std::string details_key(std::string_view leases) {
  return companion_key(leases, "holder");
}

std::string queue_key(std::string_view key) {
  return companion_key(key, "queue");
}

std::string waiters_queue_of(std::string_view key) {
  if (const auto slot = slot_of(key)) {
    return queue_key(slot->key);
  }
  return queue_key(key);
}

std::string slot_key(std::string_view key, int slot) {
  return companion_key(key, std::string(k_slot_prefix) + std::to_string(slot));
}

std::optional<SlotOf> slot_of(std::string_view name) {
  const auto parts = companion_parts(name);
  if (!parts || !is_slot_suffix(parts->suffix)) {
    return std::nullopt;
  }
  // Exactly what slot_key() writes: 1 and up, no leading zero.
  const std::string_view digits = parts->suffix.substr(k_slot_prefix.size());
  int slot = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
  if (ec != std::errc() || end != digits.data() + digits.size() || slot < 1 ||
      digits.front() == '0') {
    return std::nullopt;
  }
  return SlotOf{std::string(parts->key), slot};
}

bool is_companion_key(std::string_view name) {
  const auto parts = companion_parts(name);
  if (!parts) {
    return false;
  }
  return std::find(k_suffixes.begin(), k_suffixes.end(), parts->suffix) != k_suffixes.end() ||
         is_slot_suffix(parts->suffix);
}

void check_lock_key(std::string_view key) {
  if (is_companion_key(key)) {
    throw util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'",
                      "this name is another lock's companion key (its fencing counter, holder "
                      "details, queue, shared leases, --replace request or --slots slot); "
                      "name the lock "
                      "otherwise");
  }
}

}  // namespace nxlock::store
