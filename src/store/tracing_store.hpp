// TracingStore: the -v trace of every backend step, one line each, the same for every backend.
#pragma once

#include <memory>

#include "store/lock_listing.hpp"
#include "store/store.hpp"

namespace nxlock::store {

// Wraps a store and traces each operation through util::trace as
// "SETNX key value → 1", keys and values escaped by util::escape. The backends
// themselves trace only what is theirs alone (a Redis connect and its setup,
// redirects, subscriber messages), so each step is traced once.
class TracingStore final : public Store {
 public:
  explicit TracingStore(std::unique_ptr<Store> inner);

  std::string describe() const override { return m_inner->describe(); }
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
  WaitersQueue* queue() override { return m_queue.get(); }
  SharedLeases* shared() override { return m_shared.get(); }
  LockListing* listing() override { return m_listing.get(); }
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override { return m_inner->watch(key); }
  void wake(std::string_view key) override { m_inner->wake(key); }
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_inner->set_deadline(monotonic_deadline);
  }

 private:
  std::unique_ptr<Store> m_inner;
  std::unique_ptr<WaitersQueue> m_queue;   // traces the inner store's queue; null if it has none
  std::unique_ptr<SharedLeases> m_shared;  // likewise its shared leases
  std::unique_ptr<LockListing> m_listing;  // likewise its listing
};

}  // namespace nxlock::store
