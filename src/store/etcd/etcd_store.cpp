// EtcdStore: each key/value step one call of etcd's (EtcdKv): a txn, a range, a put, a delete.
#include "store/etcd/etcd_store.hpp"

#include <poll.h>

#include "store/etcd/etcd_watch.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"

namespace nxlock::store {

namespace {

using etcd::Compare;
using etcd::PutRequest;
using util::Error;
using util::ErrorKind;

[[noreturn]] void refuse_lock_step(std::string_view key) {
  throw Error(ErrorKind::usage, std::string(key),
              "the page's lock steps do not run on etcd (its lock is etcd's own recipe)");
}

// A watch on one key: any event seen on the stream is a change.
class EtcdWatcher final : public Watcher {
 public:
  explicit EtcdWatcher(std::unique_ptr<etcd::EtcdWatch> watch) : m_watch(std::move(watch)) {}

  WaitResult wait(util::Micros timeout, int interrupt_fd) override {
    const util::Micros until = util::mono_now() + timeout;
    for (;;) {
      pollfd fds[2] = {{m_watch->fd(), POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
      if (util::poll_until(fds, interrupt_fd >= 0 ? 2 : 1, until) == 0) {
        return WaitResult::timed_out;
      }
      if (interrupt_fd >= 0 && fds[1].revents != 0) {
        return WaitResult::interrupted;
      }
      const etcd::WatchNews news = m_watch->take();
      if (news.changed || news.ended) {
        return WaitResult::changed;  // spurious ones allowed: the caller looks again
      }
    }
  }

 private:
  std::unique_ptr<etcd::EtcdWatch> m_watch;
};

}  // namespace

etcd::ClientConfig etcd_config(const Url& url, const ConnectOptions& options) {
  etcd::ClientConfig config;
  config.name = url.redacted;
  config.members = url.seeds;
  config.timeout_seconds = options.timeout_seconds;
  if (url.tls) {
    config.tls = net::make_tls_context(options.tls, url.redacted);
  }
  config.user = url.user;
  config.password = options.password ? options.password : url.password;
  return config;
}

EtcdStore::EtcdStore(const Url& url, const ConnectOptions& options)
    : m_client(etcd_config(url, options)) {}

SetIfAbsent EtcdStore::set_if_absent(std::string_view key, std::string_view value,
                                     std::optional<std::string_view> counter,
                                     StepPolicy /*policy*/) {
  etcd::TxnRequest request;
  request.compare.push_back(Compare::created_at(key, 0));
  request.success.emplace_back(PutRequest{std::string(key), std::string(value), 0, false});
  const etcd::TxnResult answer = m_kv.txn(request);
  SetIfAbsent out;
  out.set = answer.succeeded;
  if (out.set && counter) {
    // The put's revision is the key's create revision.
    out.fence = answer.header.revision;
  }
  return out;
}

std::optional<std::string> EtcdStore::get(std::string_view key) {
  etcd::RangeRequest request;
  request.key = key;
  etcd::RangeResult answer = m_kv.range(request);
  if (answer.kvs.empty()) {
    return std::nullopt;
  }
  return std::move(answer.kvs.front().value);
}

Swap EtcdStore::get_and_set(std::string_view key, std::string_view value,
                            std::optional<Takeover> takeover, StepPolicy /*policy*/) {
  if (takeover) {
    refuse_lock_step(key);
  }
  etcd::PutResult answer = m_kv.put({std::string(key), std::string(value), 0, true});
  Swap out;
  if (answer.prev) {
    out.old = std::move(answer.prev->value);
  }
  return out;
}

void EtcdStore::set(std::string_view key, std::string_view value, StepPolicy /*policy*/) {
  m_kv.put({std::string(key), std::string(value), 0, false});
}

std::size_t EtcdStore::del(const std::vector<std::string>& keys) {
  // One txn: the keys go together, as one DEL of several keys does.
  etcd::TxnRequest request;
  for (const auto& key : keys) {
    request.success.emplace_back(etcd::DeleteRequest{key});
  }
  std::size_t deleted = 0;
  for (const auto& response : m_kv.txn(request).responses) {
    deleted += static_cast<std::size_t>(response.deleted);
  }
  return deleted;
}

bool EtcdStore::compare_and_delete(std::string_view key, std::string_view expected,
                                   std::optional<Fence> fence, StepPolicy /*policy*/) {
  if (fence) {
    refuse_lock_step(key);
  }
  etcd::TxnRequest request;
  request.compare.push_back(Compare::value_is(key, expected));
  request.success.emplace_back(etcd::DeleteRequest{std::string(key)});
  return m_kv.txn(request).succeeded;
}

bool EtcdStore::compare_and_set(std::string_view key, std::string_view expected,
                                std::string_view value, std::optional<Fence> fence,
                                StepPolicy /*policy*/) {
  if (fence) {
    refuse_lock_step(key);
  }
  etcd::TxnRequest request;
  request.compare.push_back(Compare::value_is(key, expected));
  request.success.emplace_back(PutRequest{std::string(key), std::string(value), 0, false});
  return m_kv.txn(request).succeeded;
}

util::Micros EtcdStore::now() {
  return util::wall_now();
}

std::unique_ptr<Watcher> EtcdStore::watch(std::string_view key) {
  // From the revision after a read of the key: nothing after this returns is missed.
  etcd::RangeRequest request;
  request.key = key;
  request.count_only = true;
  const std::int64_t revision = m_kv.range(request).header.revision;
  return std::make_unique<EtcdWatcher>(m_kv.watch(key, revision + 1));
}

etcd::RangeResult EtcdStore::range_prefix(std::string_view prefix) {
  return m_kv.range(etcd::RangeRequest::prefix(prefix));
}

}  // namespace nxlock::store
