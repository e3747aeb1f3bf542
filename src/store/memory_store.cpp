// MemoryStore: an in-process Store for unit tests.
#include "store/memory_store.hpp"

#include <poll.h>

#include <algorithm>

#include "store/lock_value.hpp"

namespace nxlock::store {

namespace {
// Single-threaded: a wait reports "interrupted" if the interrupt descriptor is
// readable, else "changed" if any write happened since the watch was armed,
// else times out at once (unit tests drive time themselves).
class MemoryWatcher final : public Watcher {
 public:
  MemoryWatcher(const MemoryStore& store) : m_store(store), m_seen(store.version()) {}
  WaitResult wait(util::Micros, int interrupt_fd) override {
    if (interrupt_fd >= 0) {
      pollfd pfd{interrupt_fd, POLLIN, 0};
      if (poll(&pfd, 1, 0) > 0) {
        return WaitResult::interrupted;
      }
    }
    const auto now_version = m_store.version();
    const bool changed = now_version != m_seen;
    m_seen = now_version;
    return changed ? WaitResult::changed : WaitResult::timed_out;
  }

 private:
  const MemoryStore& m_store;
  std::uint64_t m_seen;
};
}  // namespace

MemoryStore::MemoryStore(std::function<util::Micros()> clock, Tokens tokens)
    : m_clock(std::move(clock)), m_tokens(tokens) {}

bool MemoryStore::set_if_absent(std::string_view key, std::string_view value) {
  const auto [it, inserted] = m_data.try_emplace(std::string(key), value);
  m_version += inserted ? 1 : 0;
  return inserted;
}

std::optional<std::string> MemoryStore::get(std::string_view key) {
  const auto it = m_data.find(key);
  if (it == m_data.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<std::string> MemoryStore::get_and_set(std::string_view key, std::string_view value) {
  auto old = get(key);
  m_data.insert_or_assign(std::string(key), std::string(value));
  ++m_version;
  return old;
}

void MemoryStore::set(std::string_view key, std::string_view value) {
  m_data.insert_or_assign(std::string(key), std::string(value));
  ++m_version;
}

std::size_t MemoryStore::del(const std::vector<std::string>& keys) {
  std::size_t removed = 0;
  for (const auto& key : keys) {
    removed += m_data.erase(key);
  }
  m_version += removed;
  return removed;
}

bool MemoryStore::compare_and_delete(std::string_view key, std::string_view expected) {
  const auto it = m_data.find(key);
  if (it == m_data.end() || it->second != expected) {
    return false;
  }
  m_data.erase(it);
  ++m_version;
  return true;
}

bool MemoryStore::compare_and_set(std::string_view key, std::string_view expected,
                                  std::string_view value) {
  const auto it = m_data.find(key);
  if (it == m_data.end() || it->second != expected) {
    return false;
  }
  it->second = value;
  ++m_version;
  return true;
}

std::int64_t MemoryStore::increment(std::string_view counter) {
  const auto current = get(counter);
  std::int64_t next = next_fence(current ? &*current : nullptr, counter);
  if (m_tokens == Tokens::clock_floor) {
    next = std::max(next, m_clock().count());
  }
  set(counter, std::to_string(next));
  return next;
}

bool MemoryStore::counter_holds(std::string_view counter, std::int64_t fence) {
  return get(counter) == std::to_string(fence);
}

std::optional<std::int64_t> MemoryStore::set_if_absent_fenced(std::string_view key,
                                                              std::string_view value,
                                                              std::string_view counter) {
  const auto current = get(counter);
  next_fence(current ? &*current : nullptr, counter);  // a bad counter: nothing written
  if (!set_if_absent(key, value)) {
    return std::nullopt;
  }
  return increment(counter);
}

Store::FencedSwap MemoryStore::get_and_set_fenced(std::string_view key, std::string_view value,
                                                  std::string_view counter,
                                                  std::int64_t now_seconds) {
  const auto current = get(counter);
  next_fence(current ? &*current : nullptr, counter);
  FencedSwap swap;
  swap.old = get_and_set(key, value);
  if (getset_owns(swap.old, now_seconds)) {
    swap.fence = increment(counter);
  }
  return swap;
}

bool MemoryStore::compare_and_set_fenced(std::string_view key, std::string_view expected,
                                         std::string_view value, std::string_view counter,
                                         std::int64_t fence) {
  return counter_holds(counter, fence) && compare_and_set(key, expected, value);
}

bool MemoryStore::compare_and_delete_fenced(std::string_view key, std::string_view expected,
                                            std::string_view counter, std::int64_t fence) {
  return counter_holds(counter, fence) && compare_and_delete(key, expected);
}

std::unique_ptr<Watcher> MemoryStore::watch(std::string_view) {
  return std::make_unique<MemoryWatcher>(*this);
}

}  // namespace nxlock::store
