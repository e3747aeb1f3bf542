// The SETNX page's story is told on this store: it logs every step and can run another
// client's steps just before one of ours (lock_algorithm_test.cpp, lock_fencing_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/memory_store.hpp"

namespace nxlock::scripted {

// A store that logs every operation and can run a hook just before one of them,
// so a test can slip another client's steps in between ours.
class ScriptedStore final : public store::Store {
 public:
  store::MemoryStore inner;
  std::vector<std::string> log;
  std::string hook_before;  // operation name
  std::function<void()> hook;

  std::string describe() const override { return "scripted"; }
  store::SetIfAbsent set_if_absent(std::string_view k, std::string_view v,
                                   std::optional<std::string_view> c,
                                   store::StepPolicy p) override {
    step("SETNX");
    return inner.set_if_absent(k, v, c, p);
  }
  std::optional<std::string> get(std::string_view k) override {
    step("GET");
    return inner.get(k);
  }
  store::Swap get_and_set(std::string_view k, std::string_view v, std::optional<store::Takeover> t,
                          store::StepPolicy p) override {
    step("GETSET");
    return inner.get_and_set(k, v, t, p);
  }
  void set(std::string_view k, std::string_view v, store::StepPolicy p) override {
    step("SET");
    inner.set(k, v, p);
  }
  std::size_t del(const std::vector<std::string>& keys) override {
    step("DEL");
    return inner.del(keys);
  }
  // The fenced steps log as the page's steps they are.
  bool compare_and_delete(std::string_view k, std::string_view e, std::optional<store::Fence> f,
                          store::StepPolicy p) override {
    step("CAD");
    return inner.compare_and_delete(k, e, f, p);
  }
  bool compare_and_set(std::string_view k, std::string_view e, std::string_view v,
                       std::optional<store::Fence> f, store::StepPolicy p) override {
    step("CAS");
    return inner.compare_and_set(k, e, v, f, p);
  }
  util::Micros now() override { return inner.now(); }
  std::unique_ptr<store::Watcher> watch(std::string_view k) override { return inner.watch(k); }

 private:
  void step(const std::string& name) {
    log.push_back(name);
    if (hook && name == hook_before) {
      auto once = std::move(hook);
      hook = nullptr;
      once();
    }
  }
};

inline constexpr std::int64_t k_t0 = 1'732'000'000;
inline constexpr std::int64_t k_short_ttl = 10;
inline const std::string k_key = "lock.foo";

}  // namespace nxlock::scripted
