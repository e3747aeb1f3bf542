// The implementations of LockSpace, for open_lock_space() alone (lock_space.hpp).
#pragma once

#include <memory>
#include <vector>


namespace nxlock::lock {

class LockSpace;
struct Place;

// Every kind, on one store (the embedded store, one Redis deployment).
std::unique_ptr<LockSpace> store_lock_space(const Place& place);

// The exclusive lock by a majority of independent servers (quorum/), each
// connecting when first asked.
std::unique_ptr<LockSpace> quorum_lock_space(std::vector<Place> places);

// etcd's own Mutex recipe, as `etcdctl lock` takes it (etcd_mutex.hpp).
std::unique_ptr<LockSpace> etcd_lock_space(const Place& place);

}  // namespace nxlock::lock
