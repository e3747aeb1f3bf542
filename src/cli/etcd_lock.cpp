// The lock on an etcd:// backend from the command line.
#include "cli/etcd_lock.hpp"

#include "lock/etcd_mutex.hpp"
#include "store/etcd/etcd_store.hpp"
#include "util/error.hpp"

namespace nxlock::cli {

namespace {

store::EtcdStore* etcd_store(Context& ctx) {
  if (ctx.quorum()) {
    return nullptr;  // several URLs: Context::quorum_servers() refuses etcd among them
  }
  return dynamic_cast<store::EtcdStore*>(&ctx.store());
}

}  // namespace

void refuse_on_etcd(Context& ctx, const char* option) {
  if (etcd_store(ctx) != nullptr) {
    throw util::Error(util::ErrorKind::usage, option,
                      "not available on etcd yet (an `etcdctl lock` holder would not count as "
                      "exclusive to it); use the exclusive lock");
  }
}

std::unique_ptr<lock::Lockable> make_etcd_lock(Context& ctx, std::string key, int slots,
                                               bool shared) {
  store::EtcdStore* store = etcd_store(ctx);
  if (store == nullptr) {
    return nullptr;
  }
  if (slots > 0) {
    refuse_on_etcd(ctx, "--slots");
  }
  if (shared) {
    refuse_on_etcd(ctx, "--shared");
  }
  return std::make_unique<lock::EtcdMutex>(*store, std::move(key));
}

}  // namespace nxlock::cli
