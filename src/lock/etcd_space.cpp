// The locks of an etcd cluster: etcd's own Mutex recipe, exclusive.
#include <memory>
#include <utility>

#include "lock/etcd_listing.hpp"
#include "lock/etcd_mutex.hpp"
#include "lock/lock_space.hpp"
#include "lock/lock_spaces.hpp"
#include "store/etcd/etcd_store.hpp"

namespace nxlock::lock {

namespace {

class EtcdSpace final : public LockSpace {
 public:
  explicit EtcdSpace(std::unique_ptr<store::EtcdStore> store) : m_store(std::move(store)) {}

  // etcd keeps no clock: the store's is this host's.
  std::unique_ptr<Clock> clock(bool local) override { return clock_of(*m_store, local); }

  LockList list(std::string_view pattern, bool) override {
    LockList list;
    list.now = util::whole_seconds(util::wall_now());  // etcd keeps no clock: this host's
    list.rows = list_etcd_locks(*m_store, pattern, list.now);
    return list;
  }

 protected:
  std::string refusal(LockKind kind) const override {
    if (kind == LockKind::exclusive) {
      return {};
    }
    return "not available on etcd yet (an `etcdctl lock` holder would not count as "
           "exclusive to it); use the exclusive lock";
  }

  // The request must be a key the Mutex never waits on (not under KEY/), and
  // the holder's wake-up a watch of its own: not built yet.
  std::string replace_refusal() const override {
    return "not available on etcd yet (the request beside the lock, outside the KEY/ prefix "
           "etcd's Mutex waits on, is left to build); stop the holder and use -w";
  }

  std::unique_ptr<Lockable> make_lock(Clock&, std::string key, LockKind) override {
    return std::make_unique<EtcdMutex>(*m_store, std::move(key));
  }

 private:
  std::unique_ptr<store::EtcdStore> m_store;
};

}  // namespace

std::unique_ptr<LockSpace> etcd_lock_space(const Place& place) {
  return std::make_unique<EtcdSpace>(std::make_unique<store::EtcdStore>(place.url, place.options));
}

}  // namespace nxlock::lock
