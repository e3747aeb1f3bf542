// MemoryStore: an in-process Store for unit tests (the lock algorithm, the store suite).
#pragma once

#include <functional>
#include <map>

#include "store/lock_listing.hpp"
#include "store/store.hpp"

namespace nxlock::store {

class LeaseBook;

// The shared leases and the listing are private: the lock layer reaches them
// through shared() and listing().
class MemoryStore final : public Store, private SharedLeases, private LockListing {
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
                            std::optional<std::string_view> counter = {}) override;
  std::optional<std::string> get(std::string_view key) override;
  Swap get_and_set(std::string_view key, std::string_view value,
                   std::optional<Takeover> takeover = {}) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence = {}) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence = {}) override;
  util::Micros now() override { return m_clock(); }
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  SharedLeases* shared() override { return this; }
  LockListing* listing() override { return this; }

  // How many writes have happened: watchers compare it to see a change.
  std::uint64_t version() const { return m_version; }

 private:
  // SharedLeases (no waiters' queue here: `queue` and the ticket are ignored).
  Take take(const Keys& keys, const TakeRequest& request) override;
  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry) override;
  bool release(const Keys& keys, const LeaseMatch& lease) override;
  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override;
  LeaseSet read(const Keys& keys) override;
  // Writes `book` as the lease set and the lock key as its latest expiry (both go when empty).
  void store_leases(std::string_view key, std::string_view leases, const LeaseBook& book);
  // LockListing: one batch of every matching key; no queue, so no waiters.
  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override;

  std::function<util::Micros()> m_clock;
  Tokens m_tokens;
  std::map<std::string, std::string, std::less<>> m_data;
  std::uint64_t m_version = 0;

  // The counter's token (nullopt: absent); throws for a bad counter (fenced_steps.hpp).
  std::optional<std::int64_t> token_of(std::string_view counter);
  // INCR counter, after `last` (one process, one thread: every operation here is atomic).
  std::int64_t issue(std::string_view counter, std::optional<std::int64_t> last);
  // Whether `fence` holds; an absent counter is written back as the token.
  bool holds(const std::optional<Fence>& fence);
};

}  // namespace nxlock::store
