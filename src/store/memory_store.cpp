// MemoryStore: an in-process Store for unit tests.
#include "store/memory_store.hpp"

#include <poll.h>

#include "store/keys.hpp"
#include "store/fenced_steps.hpp"
#include "store/lease_book.hpp"
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

// Nothing here expires: every step's StepPolicy is ignored, and the store's
// own bookkeeping writes (counters, lease sets) are plain steps.
MemoryStore::MemoryStore(std::function<util::Micros()> clock, Tokens tokens)
    : m_clock(std::move(clock)), m_tokens(tokens) {}

SetIfAbsent MemoryStore::set_if_absent(std::string_view key, std::string_view value,
                                       std::optional<std::string_view> counter,
                                       StepPolicy /*policy*/) {
  const auto last = counter ? token_of(*counter) : std::nullopt;  // a bad counter: nothing written
  const auto [it, inserted] = m_data.try_emplace(std::string(key), value);
  m_version += inserted ? 1 : 0;
  SetIfAbsent result{inserted, std::nullopt};
  if (inserted && counter) {
    result.fence = issue(*counter, last);
  }
  return result;
}

std::optional<std::string> MemoryStore::get(std::string_view key) {
  const auto it = m_data.find(key);
  if (it == m_data.end()) {
    return std::nullopt;
  }
  return it->second;
}

Swap MemoryStore::get_and_set(std::string_view key, std::string_view value,
                              std::optional<Takeover> takeover, StepPolicy /*policy*/) {
  const auto last = takeover ? token_of(takeover->counter) : std::nullopt;
  Swap swap;
  swap.old = get(key);
  m_data.insert_or_assign(std::string(key), std::string(value));
  ++m_version;
  if (takeover && getset_owns(swap.old, takeover->now_seconds)) {
    swap.fence = issue(takeover->counter, last);
  }
  return swap;
}

void MemoryStore::set(std::string_view key, std::string_view value, StepPolicy /*policy*/) {
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

bool MemoryStore::compare_and_delete(std::string_view key, std::string_view expected,
                                     std::optional<Fence> fence, StepPolicy /*policy*/) {
  const auto it = m_data.find(key);
  if (it == m_data.end() || it->second != expected || !holds(fence)) {
    return false;
  }
  m_data.erase(it);
  ++m_version;
  return true;
}

bool MemoryStore::compare_and_set(std::string_view key, std::string_view expected,
                                  std::string_view value, std::optional<Fence> fence,
                                  StepPolicy /*policy*/) {
  const auto it = m_data.find(key);
  if (it == m_data.end() || it->second != expected || !holds(fence)) {
    return false;
  }
  it->second = value;
  ++m_version;
  return true;
}

std::optional<std::int64_t> MemoryStore::token_of(std::string_view counter) {
  return counter_token(get(counter), counter);
}

std::int64_t MemoryStore::issue(std::string_view counter, std::optional<std::int64_t> last) {
  const std::int64_t floor = m_tokens == Tokens::clock_floor ? m_clock().count() : 0;
  // Never nullopt: token_of() refused a counter at its maximum.
  const std::int64_t next = *next_token(last, floor);
  set(counter, std::to_string(next), k_plain_step);
  return next;
}

bool MemoryStore::holds(const std::optional<Fence>& fence) {
  if (!fence) {
    return true;
  }
  // As Redis's scripts compare: a counter that holds no integer holds no
  // token either (0: never issued), and refuses without an error.
  const auto text = get(fence->counter);
  const auto counter = text ? std::optional(parse_fence(*text).value_or(0)) : std::nullopt;
  if (!counter_holds(counter, fence->token)) {
    return false;
  }
  if (!counter) {
    set(fence->counter, std::to_string(fence->token), k_plain_step);
  }
  return true;
}

SharedLeases::Take MemoryLeases::take(const Keys& keys, const TakeRequest& request,
                                      StepPolicy /*policy*/) {
  const std::int64_t now = util::whole_seconds(m_store.now());
  LeaseBook book(m_store.get(keys.leases));
  book.prune(now);
  Take result;
  result.current = m_store.get(keys.lock);
  const auto last = m_store.token_of(keys.counter);
  const LeaseGate gate = lease_gate(result.current, last, book, request.slots, now);
  if (gate == LeaseGate::held || gate == LeaseGate::not_lock) {
    result.outcome = Take::Outcome::held;
    return result;
  }
  if (gate == LeaseGate::fresh) {
    book.clear();
  }
  result.id = request.slots > 0 ? book.free_slot(request.slots) : std::string(request.id);
  book.put(result.id, request.expiry);
  result.outcome = Take::Outcome::taken;
  result.fence = m_store.issue(keys.counter, last);
  book.set_token(*result.fence);
  book.record_details(result.id,
                      std::to_string(*result.fence));  // the lease's own token (LeaseMatch)
  store_leases(keys.lock, keys.leases, book);
  return result;
}

bool MemoryLeases::renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
                         StepPolicy /*policy*/) {
  const std::int64_t now = util::whole_seconds(m_store.now());
  LeaseBook book(m_store.get(keys.leases));
  book.prune(now);
  if (!book.holds(m_store.get(keys.lock), m_store.token_of(keys.counter)) || !book.has(lease)) {
    return false;
  }
  book.put(lease.id, expiry);
  store_leases(keys.lock, keys.leases, book);
  return true;
}

bool MemoryLeases::release(const Keys& keys, const LeaseMatch& lease, StepPolicy /*policy*/) {
  const std::int64_t now = util::whole_seconds(m_store.now());
  LeaseBook book(m_store.get(keys.leases));
  book.prune(now);
  if (!book.holds(m_store.get(keys.lock), m_store.token_of(keys.counter)) || !book.has(lease)) {
    return false;
  }
  book.remove(lease.id);
  store_leases(keys.lock, keys.leases, book);
  return true;
}

bool MemoryLeases::record_details(std::string_view leases, std::string_view id,
                                  std::string_view details) {
  LeaseBook book(m_store.get(leases));
  book.prune(util::whole_seconds(m_store.now()));
  if (!book.record_details(id, details)) {
    return false;
  }
  m_store.set(leases, book.encode(), k_plain_step);
  return true;
}

LeaseSet MemoryLeases::read(const Keys& keys) {
  LeaseBook book(m_store.get(keys.leases));
  book.prune(util::whole_seconds(m_store.now()));
  LeaseSet set;
  set.lock_value = m_store.get(keys.lock);
  set.leases = book.holders();
  set.holding = book.holds(set.lock_value, m_store.token_of(keys.counter));
  return set;
}

void MemoryLeases::store_leases(std::string_view key, std::string_view leases,
                                const LeaseBook& book) {
  if (book.empty()) {
    m_store.del({std::string(key), std::string(leases)});
    return;
  }
  m_store.set(key, std::to_string(book.latest()), k_plain_step);
  m_store.set(leases, book.encode(), k_plain_step);
}

void MemoryListing::list(std::string_view pattern, const Wanted& wanted, const Visit& visit) {
  std::vector<ListedLock> batch;
  for (const auto& [key, value] : m_store.data()) {
    if (!glob_match(pattern, key) || !wanted(key) || !parse_lock_timestamp(value)) {
      continue;
    }
    ListedLock& lock = batch.emplace_back();
    lock.key = key;
    lock.value = value;
    lock.holder = m_store.get(store::holder_key(key));
    const std::string leases = store::shared_key(key);
    const std::string counter = store::fence_key(key);
    if (LeaseSet set = m_store.shared()->read(
            {.lock = key, .counter = counter, .leases = leases, .queue = {}});
        set.holding) {
      lock.shared = std::move(set.leases);
    }
    if (const auto token = m_store.get(counter)) {
      lock.fence = parse_fence(*token);
    }
  }
  visit(std::move(batch));
}

std::unique_ptr<Watcher> MemoryStore::watch(std::string_view) {
  return std::make_unique<MemoryWatcher>(*this);
}

}  // namespace nxlock::store
