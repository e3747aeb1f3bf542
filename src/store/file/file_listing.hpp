// FileListing: the embedded store's listing (LockListing), in file_listing.cpp.
#pragma once

#include <string_view>

#include "store/file/file_core.hpp"
#include "store/lock_listing.hpp"

namespace nxlock::store {

// Every bucket read once, without a lock: each is replaced whole by rename,
// so a read sees an old or a new bucket.
class FileListing final : public LockListing {
 public:
  // `leases`: the store's, to read again a lease set whose buckets were read apart.
  FileListing(FileCore& core, SharedLeases& leases) : m_core(core), m_leases(leases) {}

  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override;

 private:
  FileCore& m_core;
  SharedLeases& m_leases;
};

}  // namespace nxlock::store
