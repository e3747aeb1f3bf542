// FileLeases: the embedded store's leased holders (SharedLeases: shared and slots), in
// file_leases.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "store/file/file_core.hpp"
#include "store/file/file_queue.hpp"
#include "store/store.hpp"

namespace nxlock::store {

// The lease set is an entry beside the lock, changed with the lock's entry in
// one transaction over both buckets (Buckets::update_pair); the rules are
// LeaseBook's. A take passes the same queue gate as an exclusive one.
class FileLeases final : public SharedLeases {
 public:
  // `steps` is the store these leases belong to (its GET); `queue` its waiters' queue.
  FileLeases(FileCore& core, Store& steps, FileQueue& queue)
      : m_core(core), m_steps(steps), m_queue(queue) {}

  Take take(const Keys& keys, const TakeRequest& request, StepPolicy policy) override;
  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
             StepPolicy policy) override;
  bool release(const Keys& keys, const LeaseMatch& lease, StepPolicy policy) override;
  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override;
  LeaseSet read(const Keys& keys) override;

 private:
  // take()'s lease step alone, without the queue.
  Take take_lease(const Keys& keys, const TakeRequest& request);

  FileCore& m_core;
  Store& m_steps;
  FileQueue& m_queue;
};

}  // namespace nxlock::store
