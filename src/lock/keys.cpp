// Companion keys beside a lock, named into the lock key's Redis Cluster hash slot.
#include "lock/keys.hpp"

namespace nxlock::lock {

namespace {

// The Cluster specification's rule: the first '{', the first '}' after it, and
// at least one byte between them.
bool has_hash_tag(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) {
    return false;
  }
  const auto close = key.find('}', open + 1);
  return close != std::string_view::npos && close > open + 1;
}

}  // namespace

std::string companion_key(std::string_view key, std::string_view suffix) {
  std::string out;
  out.reserve(key.size() + suffix.size() + 3);
  if (has_hash_tag(key)) {
    out += key;
  } else {
    out += '{';
    out += key;
    out += '}';
  }
  out += ':';
  out += suffix;
  return out;
}

std::string fence_key(std::string_view key) {
  return companion_key(key, "fence");
}

std::string queue_key(std::string_view key) {
  return companion_key(key, "queue");
}

}  // namespace nxlock::lock
