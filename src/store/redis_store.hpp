// RedisStore: the Store interface over a Redis server (hiredis, sync API).
#pragma once

#include <hiredis/hiredis.h>

#include <initializer_list>
#include <memory>

#include "store/make_store.hpp"
#include "store/store.hpp"
#include "store/url.hpp"

namespace nxlock::store {

class RedisStore final : public Store {
 public:
  // Connects, authenticates and selects the db. Throws util::Error naming the
  // redacted URL: unavailable (69) when refused or timed out, permission (77)
  // when authentication fails.
  RedisStore(const Url& url, const ConnectOptions& options);
  ~RedisStore() override;

  std::string describe() const override { return m_url.redacted; }
  bool set_if_absent(std::string_view key, std::string_view value) override;
  std::optional<std::string> get(std::string_view key) override;
  std::optional<std::string> get_and_set(std::string_view key, std::string_view value) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected) override;
  bool compare_and_set(std::string_view key, std::string_view expected,
                       std::string_view value) override;
  util::Micros now() override;  // the server's TIME
  std::unique_ptr<Watcher> watch(std::string_view key) override;
  void notify(std::string_view key) override;  // PUBLISH on the key's wake-up channel

 private:
  using Context = std::unique_ptr<redisContext, decltype(&redisFree)>;
  using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

  // Runs one command on m_context (arguments are binary safe); `key` is the key
  // it touches, named in errors. Throws util::Error for a lost connection or an
  // error reply; never returns an error reply.
  Reply run(std::initializer_list<std::string_view> args, std::string_view key);

  Url m_url;
  ConnectOptions m_options;
  Context m_context;
};

}  // namespace nxlock::store
