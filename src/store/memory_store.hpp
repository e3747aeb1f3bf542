// MemoryStore: an in-process Store for unit tests (the lock algorithm, the store suite).
#pragma once

#include <functional>
#include <map>

#include "store/lock_listing.hpp"
#include "store/store.hpp"

namespace nxlock::store {

class LeaseBook;
class MemoryStore;

// MemoryStore's shared leases (no waiters' queue here: `queue` and the ticket
// are ignored), kept as plain keys of the store.
class MemoryLeases final : public SharedLeases {
 public:
  explicit MemoryLeases(MemoryStore& store) : m_store(store) {}

  Take take(const Keys& keys, const TakeRequest& request, StepPolicy policy) override;
  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
             StepPolicy policy) override;
  bool release(const Keys& keys, const LeaseMatch& lease, StepPolicy policy) override;
  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override;
  LeaseSet read(const Keys& keys) override;

 private:
  // Writes `book` as the lease set and the lock key as its latest expiry (both go when empty).
  void store_leases(std::string_view key, std::string_view leases, const LeaseBook& book);

  MemoryStore& m_store;
};

// MemoryStore's listing: one batch of every matching key; no queue, so no waiters.
class MemoryListing final : public LockListing {
 public:
  explicit MemoryListing(MemoryStore& store) : m_store(store) {}

  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override;

 private:
  MemoryStore& m_store;
};

class MemoryStore final : public Store {
 public:
  // How an owning step computes its token from the counter beside the lock.
  enum class Tokens {
    increment,    // INCR: 1, 2, 3... (the tests that script exact counters)
    clock_floor,  // max(counter + 1, now() in microseconds), as the real backends do:
                  // a deleted counter never makes a token go back
  };

  // `clock` supplies now(); by default the real wall clock.
  explicit MemoryStore(std::function<util::Micros()> clock = util::wall_now,
                       Tokens tokens = Tokens::increment);

  std::string describe() const override { return "memory"; }
  SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                            std::optional<std::string_view> counter, StepPolicy policy) override;
  std::optional<std::string> get(std::string_view key) override;
  Swap get_and_set(std::string_view key, std::string_view value, std::optional<Takeover> takeover,
                   StepPolicy policy) override;
  void set(std::string_view key, std::string_view value, StepPolicy policy) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence, StepPolicy policy) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence, StepPolicy policy) override;
  util::Micros now() override { return m_clock(); }
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  SharedLeases* shared() override { return &m_leases; }
  LockListing* listing() override { return &m_listing; }

  // How many writes have happened: watchers compare it to see a change.
  std::uint64_t version() const { return m_version; }

  // ---- For its leases and listing ----

  // The counter's token (nullopt: absent); throws for a bad counter (fenced_steps.hpp).
  std::optional<std::int64_t> token_of(std::string_view counter);
  // INCR counter, after `last` (one process, one thread: every operation here is atomic).
  std::int64_t issue(std::string_view counter, std::optional<std::int64_t> last);
  // Every key and its value, in key order.
  const std::map<std::string, std::string, std::less<>>& data() const { return m_data; }

 private:
  // Whether `fence` holds; an absent counter is written back as the token.
  bool holds(const std::optional<Fence>& fence);

  std::function<util::Micros()> m_clock;
  Tokens m_tokens;
  std::map<std::string, std::string, std::less<>> m_data;
  std::uint64_t m_version = 0;
  MemoryLeases m_leases{*this};
  MemoryListing m_listing{*this};
};

}  // namespace nxlock::store
