// make_store: picks the backend for a URL.
#include "store/make_store.hpp"

#include "store/default_store.hpp"
#include "store/etcd/etcd_store.hpp"
#include "store/file/access_advice.hpp"
#include "store/file/file_store.hpp"
#include "store/redis/redis_store.hpp"
#include "store/tracing_store.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

std::unique_ptr<Store> make_backend(const Url& url, const ConnectOptions& options) {
  switch (url.scheme) {
    case Url::Scheme::redis_tcp:
    case Url::Scheme::redis_unix:
    case Url::Scheme::redis_sentinel:
      return std::make_unique<RedisStore>(url, options);
    case Url::Scheme::etcd:
      return std::make_unique<EtcdStore>(url, options);
    case Url::Scheme::file:
      break;
  }
  FileStore::Options file_options;
  file_options.durable = url.durable;
  file_options.require_owner = url.is_default_store;
  if (url.no_url) {
    file_options.create_hint = default_store_hint();  // a cron job's HOME may not exist
  }
  file_options.record_owner = options.renews_while_alive;
  return std::make_unique<FileStore>(url.path, file_options);
}

}  // namespace

std::unique_ptr<Store> make_store(const Url& url, const ConnectOptions& options) {
  auto store = make_backend(url, options);
  // etcd traces its own calls (and its lock needs the EtcdStore itself).
  if (util::tracing() && url.scheme != Url::Scheme::etcd) {
    return std::make_unique<TracingStore>(std::move(store));  // -v: every step, once
  }
  return store;
}

util::Error with_backend_advice(const Url& url, const util::Error& error) {
  return with_access_advice(url, error);
}

const char* builtin_backends() {
  return "redis (tcp, unix), rediss (tls), redis+sentinel, file (embedded), etcd, etcds (tls)";
}

}  // namespace nxlock::store
