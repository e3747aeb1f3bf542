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
    if (line.starts_with('@')) {
      m_token = parse_fence(line.substr(1));
      continue;
    }
    const auto space = line.find(' ');
    if (space == std::string_view::npos || space == 0) {
      continue;
    }
    const std::string_view rest = line.substr(space + 1);
    const auto details_at = rest.find(' ');
    if (const auto expiry = parse_lock_timestamp(rest.substr(0, details_at))) {
      put(line.substr(0, space), *expiry);
      if (details_at != std::string_view::npos) {
        record_details(line.substr(0, space), rest.substr(details_at + 1));
      }
    }
  }
}

void LeaseBook::prune(std::int64_t now_seconds) {
  std::erase_if(m_leases, [&](const Lease& lease) { return lease.expiry < now_seconds; });
}

std::optional<std::int64_t> LeaseBook::expiry_of(std::string_view id) const {
  for (const auto& lease : m_leases) {
    if (lease.id == id) {
      return lease.expiry;
    }
  }
  return std::nullopt;
}

void LeaseBook::put(std::string_view id, std::int64_t expiry) {
  for (auto& lease : m_leases) {
    if (lease.id == id) {
      lease.expiry = expiry;
      return;
    }
  }
  m_leases.push_back(Lease{std::string(id), expiry, {}});
}

bool LeaseBook::record_details(std::string_view id, std::string_view details) {
  for (auto& lease : m_leases) {
    if (lease.id == id) {
      // One line each: a newline would end the lease's line.
      lease.details = details.substr(0, details.find('\n'));
      return true;
    }
  }
  return false;
}

void LeaseBook::remove(std::string_view id) {
  std::erase_if(m_leases, [&](const Lease& lease) { return lease.id == id; });
}

std::int64_t LeaseBook::latest() const {
  std::int64_t latest = 0;
  for (const auto& lease : m_leases) {
    latest = std::max(latest, lease.expiry);
  }
  return latest;
}

std::vector<SharedHolder> LeaseBook::holders() const {
  std::vector<SharedHolder> found;
  for (const auto& lease : m_leases) {
    SharedHolder& holder = found.emplace_back();
    holder.id = lease.id;
    holder.expiry = lease.expiry;
    if (!lease.details.empty()) {
      holder.details = lease.details;
    }
  }
  return found;
}

std::string LeaseBook::encode() const {
  std::string text;
  if (m_token) {
    text += "@" + std::to_string(*m_token) + "\n";
  }
  for (const auto& lease : m_leases) {
    text += lease.id + " " + std::to_string(lease.expiry);
    text += lease.details.empty() ? "\n" : " " + lease.details + "\n";
  }
  return text;
}

bool LeaseBook::has(const SharedLeases::LeaseMatch& match) const {
  const auto expiry = expiry_of(match.id);
  if (!expiry || (match.expiry && *match.expiry != *expiry)) {
    return false;
  }
  const auto token = token_of(match.id);
  return !match.token || !token || *token == *match.token;
}

std::optional<std::int64_t> LeaseBook::token_of(std::string_view id) const {
  for (const auto& lease : m_leases) {
    if (lease.id == id) {
      return parse_fence(std::string_view(lease.details).substr(0, lease.details.find(' ')));
    }
  }
  return std::nullopt;
}

std::string LeaseBook::free_slot(int slots) const {
  for (int slot = 1; slot <= slots; ++slot) {
    const std::string id = "#" + std::to_string(slot);
    if (!expiry_of(id)) {
      return id;
    }
  }
  return {};
}

bool LeaseBook::holds(const std::optional<std::string>& current,
                      std::optional<std::int64_t> key_token) const {
  return !empty() && current && *current == std::to_string(latest()) &&
         (!m_token || key_token == m_token);
}

LeaseGate lease_gate(const std::optional<std::string>& current,
                     std::optional<std::int64_t> key_token, const LeaseBook& book, int slots,
                     std::int64_t now_seconds) {
  if (!current) {
    return LeaseGate::fresh;
  }
  const auto expiry = parse_lock_timestamp(*current);
  if (!expiry) {
    return LeaseGate::not_lock;
  }
  if (!book.holds(current, key_token)) {
    // A held key that no live set holds is an exclusive holder's (or a page
    // client's); an expired one is free, and any leases left are lost.
    return *expiry < now_seconds ? LeaseGate::fresh : LeaseGate::held;
  }
  const bool slot_set = is_slot_lease(book.holders().front().id);
  if (slot_set != (slots > 0) || (slots > 0 && book.free_slot(slots).empty())) {
    return LeaseGate::held;
  }
  return LeaseGate::join;
}

}  // namespace nxlock::store
