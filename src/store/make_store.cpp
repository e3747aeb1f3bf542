// make_store: picks the backend for a URL.
#include "store/make_store.hpp"

#include "store/file_store.hpp"
#include "store/redis/redis_store.hpp"

namespace nxlock::store {

std::unique_ptr<Store> make_store(const Url& url, const ConnectOptions& options) {
  switch (url.scheme) {
    case Url::Scheme::redis_tcp:
    case Url::Scheme::redis_unix:
    case Url::Scheme::redis_sentinel:
      return std::make_unique<RedisStore>(url, options);
    case Url::Scheme::file:
      break;
  }
  FileStore::Options file_options;
  file_options.create = options.create;
  file_options.durable = url.durable;
  file_options.require_owner = url.is_default_store;
  return std::make_unique<FileStore>(url.path, file_options);
}

const char* builtin_backends() {
  return "redis (tcp, unix), rediss (tls), redis+sentinel, file (embedded)";
}

}  // namespace nxlock::store
