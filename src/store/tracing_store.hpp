// TracingStore: the -v trace of every backend step, one line each, the same for every backend.
#pragma once

#include <memory>

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
  bool set_if_absent(std::string_view key, std::string_view value) override;
  std::optional<std::string> get(std::string_view key) override;
  std::optional<std::string> get_and_set(std::string_view key, std::string_view value) override;
  void set(std::string_view key, std::string_view value) override;
  std::size_t del(const std::vector<std::string>& keys) override;
  bool compare_and_delete(std::string_view key, std::string_view expected) override;
  bool compare_and_set(std::string_view key, std::string_view expected,
                       std::string_view value) override;
  std::optional<std::int64_t> set_if_absent_fenced(std::string_view key, std::string_view value,
                                                   std::string_view counter) override;
  FencedSwap get_and_set_fenced(std::string_view key, std::string_view value,
                                std::string_view counter, std::int64_t now_seconds) override;
  bool compare_and_set_fenced(std::string_view key, std::string_view expected,
                              std::string_view value, std::string_view counter,
                              std::int64_t fence) override;
  bool compare_and_delete_fenced(std::string_view key, std::string_view expected,
                                 std::string_view counter, std::int64_t fence) override;
  bool has_queue() const override { return m_inner->has_queue(); }
  QueuedSet set_if_absent_queued(std::string_view key, std::string_view value,
                                 std::string_view counter, std::string_view queue,
                                 std::string_view ticket, bool waiting,
                                 util::Micros lease) override;
  bool compare_and_delete_queued(std::string_view key, std::string_view expected,
                                 std::string_view counter, std::int64_t fence,
                                 std::string_view queue) override;
  void leave_queue(std::string_view key, std::string_view queue, std::string_view ticket) override;
  util::Micros now() override;
  std::unique_ptr<Watcher> watch(std::string_view key) override { return m_inner->watch(key); }
  std::unique_ptr<Watcher> watch_queued(std::string_view key, std::string ticket) override {
    return m_inner->watch_queued(key, std::move(ticket));
  }
  void keep_keys_for(util::Micros lifetime) override { m_inner->keep_keys_for(lifetime); }
  void decide_on_own_clock(bool yes) override { m_inner->decide_on_own_clock(yes); }
  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_inner->set_deadline(monotonic_deadline);
  }

 private:
  std::unique_ptr<Store> m_inner;
};

}  // namespace nxlock::store
