// EtcdStore: the key/value steps on an etcd cluster (setnx, get, getset, del, list), and its client.
//
// The lock itself is not the page's algorithm over these steps but etcd's own
// recipe (lock/etcd_mutex.hpp), over kv(): etcd's calls, typed. Values are
// exact bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/connect_options.hpp"
#include "store/etcd/etcd_client.hpp"
#include "store/etcd/etcd_kv.hpp"
#include "store/store.hpp"
#include "store/url.hpp"

namespace nxlock::store {

class EtcdStore final : public Store {
 public:
  // Throws util::Error(usage) for an unreadable TLS file; connects lazily.
  EtcdStore(const Url& url, const ConnectOptions& options);

  std::string describe() const override { return m_client.name(); }

  // A txn: put if the key's create revision is 0. With a counter, `fence` is
  // the new key's create revision (etcd's own monotonic counter; `counter` is not written).
  SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                            std::optional<std::string_view> counter,
                            StepPolicy policy) override;
  std::optional<std::string> get(std::string_view key) override;
  // A put with prev_kv; a Takeover is refused (usage): etcd's lock is not the page's.
  Swap get_and_set(std::string_view key, std::string_view value,
                   std::optional<Takeover> takeover, StepPolicy policy) override;
  void set(std::string_view key, std::string_view value, StepPolicy policy) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  // Txns comparing the value; a Fence is refused (usage).
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence, StepPolicy policy) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence, StepPolicy policy) override;
  // etcd keeps no clock: the local one.
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  void set_deadline(std::optional<util::Micros> deadline) override { m_client.set_cap(deadline); }

  // etcd's calls (KV, leases, watches), for etcd's own lock recipe.
  etcd::EtcdKv& kv() { return m_kv; }

  // Every key that starts with `prefix` (one linearizable range), with its
  // revisions and lease, and the revision the range was read at (its header).
  etcd::RangeResult range_prefix(std::string_view prefix);

 private:
  etcd::EtcdClient m_client;
  etcd::EtcdKv m_kv{m_client};
};

// The client for an etcd:// URL with the connect options (TLS, password).
etcd::ClientConfig etcd_config(const Url& url, const ConnectOptions& options);

}  // namespace nxlock::store
