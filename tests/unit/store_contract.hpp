// The store contract suite: every backend runs the same TEST_Ps (store_contract_test.cpp).
// A backend joins by instantiating StoreContract with its factory in its own file.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "store/store.hpp"

namespace nxlock::testing {

struct StoreFactory {
  std::string name;
  // Returns a store that is empty and private to the calling test.
  std::function<std::unique_ptr<store::Store>()> make;
};

class StoreContract : public ::testing::TestWithParam<const StoreFactory*> {
 protected:
  void SetUp() override { m_store = GetParam()->make(); }
  void TearDown() override { m_store.reset(); }
  std::unique_ptr<store::Store> m_store;
};

// The waiters' queue part of the store suite, instantiated only for the backends
// that keep a queue (Store::queue), so that no test of it is ever skipped.
class QueueContract : public StoreContract {
 protected:
  void SetUp() override {
    StoreContract::SetUp();
    ASSERT_NE(m_store->queue(), nullptr);
  }

  static constexpr util::Micros k_long_lease{10'000'000};

  // The queued step under test, for ticket `ticket` on lock "k", counter "c", queue "q".
  store::WaitersQueue::QueuedSet attempt(const std::string& ticket, bool waiting = true,
                                         util::Micros lease = k_long_lease) {
    return m_store->queue()->take_or_queue("k", "v-" + ticket, "c", "q", ticket, waiting, lease,
                                           store::k_plain_step);
  }
};

inline std::string factory_name(const ::testing::TestParamInfo<const StoreFactory*>& info) {
  return info.param->name;
}

}  // namespace nxlock::testing
