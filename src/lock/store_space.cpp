// The locks of one store (the embedded store, one Redis deployment): every kind.
#include <memory>
#include <utility>

#include "lock/lease_lock.hpp"
#include "lock/lock.hpp"
#include "lock/lock_space.hpp"
#include "lock/lock_spaces.hpp"
#include "store/make_store.hpp"

namespace nxlock::lock {

namespace {

class StoreSpace final : public LockSpace {
 public:
  explicit StoreSpace(std::unique_ptr<store::Store> store) : m_store(std::move(store)) {}

  std::unique_ptr<Clock> clock(bool local) override { return clock_of(*m_store, local); }

  LockList list(std::string_view pattern, bool with_expired) override {
    LockList list;
    list.now = util::whole_seconds(m_store->now());  // the clock its lock decisions use
    list.rows = list_locks(*m_store, pattern, list.now, with_expired);
    return list;
  }

 protected:
  std::string refusal(LockKind) const override { return {}; }

  std::unique_ptr<Lockable> make_lock(Clock& clock, std::string key, LockKind kind) override {
    if (kind == LockKind::shared) {
      return std::make_unique<LeaseLock>(*m_store, clock, std::move(key), 0);
    }
    return std::make_unique<Lock>(*m_store, clock, std::move(key));
  }

  std::unique_ptr<SlotLock> make_slots(Clock& clock, std::string key, int slots) override {
    return std::make_unique<LeaseLock>(*m_store, clock, std::move(key), slots);
  }

  // --replace: the request beside the lock, on this store.
  std::string replace_refusal() const override { return {}; }
  std::unique_ptr<ReplaceRequests> make_replace_requests(Clock& clock, std::string key) override {
    return std::make_unique<ReplaceRequests>(*m_store, clock, std::move(key));
  }

 private:
  std::unique_ptr<store::Store> m_store;
};

}  // namespace

std::unique_ptr<LockSpace> store_lock_space(const Place& place) {
  return std::make_unique<StoreSpace>(store::make_store(place.url, place.options));
}

}  // namespace nxlock::lock
