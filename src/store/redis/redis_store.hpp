// RedisStore: the Store interface over one Redis connection (TCP, unix socket or TLS).
// redis_store.cpp connects and routes (RedisCore), redis_steps.cpp has the steps,
// redis_queue.cpp the waiters' queue, redis_leases.cpp the leases, redis_listing.cpp the
// listing, scripts.cpp their Lua.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/connect_options.hpp"
#include "store/redis/redis_core.hpp"
#include "store/redis/redis_leases.hpp"
#include "store/redis/redis_listing.hpp"
#include "store/redis/redis_queue.hpp"
#include "store/store.hpp"
#include "store/url.hpp"

namespace nxlock::store {

// The steps are RedisStore's own; the waiters' queue, the shared leases and
// the listing are parts of it, each with only what it needs of the core.
class RedisStore final : public Store {
 public:
  // Connects (RedisCore). Throws util::Error naming the redacted URL:
  // unavailable (69) when refused or timed out, permission (77) when
  // authentication or TLS verification fails.
  RedisStore(const Url& url, const ConnectOptions& options);
  ~RedisStore() override;

  std::string describe() const override { return m_core.name(); }
  SetIfAbsent set_if_absent(std::string_view key, std::string_view value,
                            std::optional<std::string_view> counter, StepPolicy policy) override;
  std::optional<std::string> get(std::string_view key) override;
  Swap get_and_set(std::string_view key, std::string_view value, std::optional<Takeover> takeover,
                   StepPolicy policy) override;
  void set(std::string_view key, std::string_view value, StepPolicy policy) override;
  std::size_t del(const std::vector<std::string>& keys) override;  // and PUBLISH, in one trip
  bool compare_and_delete(std::string_view key, std::string_view expected,
                          std::optional<Fence> fence, StepPolicy policy) override;
  bool compare_and_set(std::string_view key, std::string_view expected, std::string_view value,
                       std::optional<Fence> fence, StepPolicy policy) override;
  WaitersQueue* queue() override { return &m_queue; }
  SharedLeases* shared() override { return &m_leases; }
  LockListing* listing() override { return &m_listing; }
  util::Micros now() override;  // the server's TIME
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  void wake(std::string_view key) override;
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_core.set_deadline(monotonic_deadline);
  }

 private:
  RedisCore m_core;
  RedisQueue m_queue;
  RedisLeases m_leases;
  RedisListing m_listing;
};

}  // namespace nxlock::store
