// LeaseBook: the shared holders' leases of the embedded and memory stores.
#include "store/lease_book.hpp"

#include <algorithm>

#include "store/lock_value.hpp"

namespace nxlock::store {

LeaseBook::LeaseBook(const std::optional<std::string>& text) {
  if (!text) {
    return;
  }
  std::size_t at = 0;
  while (at < text->size()) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) {
      end = text->size();
    }
    const std::string_view line = std::string_view(*text).substr(at, end - at);
    at = end + 1;
    const auto space = line.find(' ');
    if (space == std::string_view::npos || space == 0) {
      continue;
    }
    if (const auto expiry = parse_lock_timestamp(line.substr(space + 1))) {
      put(line.substr(0, space), *expiry);
    }
  }
}

void LeaseBook::prune(std::int64_t now_seconds) {
  std::erase_if(m_leases, [&](const auto& lease) { return lease.second < now_seconds; });
}

std::optional<std::int64_t> LeaseBook::expiry_of(std::string_view id) const {
  for (const auto& [lease_id, expiry] : m_leases) {
    if (lease_id == id) {
      return expiry;
    }
  }
  return std::nullopt;
}

void LeaseBook::put(std::string_view id, std::int64_t expiry) {
  for (auto& [lease_id, lease_expiry] : m_leases) {
    if (lease_id == id) {
      lease_expiry = expiry;
      return;
    }
  }
  m_leases.emplace_back(std::string(id), expiry);
}

void LeaseBook::remove(std::string_view id) {
  std::erase_if(m_leases, [&](const auto& lease) { return lease.first == id; });
}

std::int64_t LeaseBook::latest() const {
  std::int64_t latest = 0;
  for (const auto& lease : m_leases) {
    latest = std::max(latest, lease.second);
  }
  return latest;
}

std::string LeaseBook::encode() const {
  std::string text;
  for (const auto& [id, expiry] : m_leases) {
    text += id + " " + std::to_string(expiry) + "\n";
  }
  return text;
}

SharedGate shared_gate(const std::optional<std::string>& current, bool live_leases,
                       std::int64_t now_seconds) {
  if (!current) {
    return SharedGate::open;
  }
  const auto expiry = parse_lock_timestamp(*current);
  if (!expiry) {
    return SharedGate::not_lock;
  }
  // While a lease lives the key holds the latest one's expiry (SharedLeases):
  // a held key with no live lease is an exclusive holder's.
  return live_leases || *expiry < now_seconds ? SharedGate::open : SharedGate::exclusive;
}

}  // namespace nxlock::store
