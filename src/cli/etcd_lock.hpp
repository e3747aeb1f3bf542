// The lock on an etcd:// backend from the command line: etcd's own recipe, and what it refuses.
#pragma once

#include <memory>
#include <string>

#include "cli/context.hpp"
#include "lock/lockable.hpp"

namespace nxlock::cli {

// The etcd lock KEY (lock/etcd_mutex.hpp) when the backend is etcd://, else
// nullptr. Throws usage (64) for --slots or --shared on etcd.
std::unique_ptr<lock::Lockable> make_etcd_lock(Context& ctx, std::string key, int slots,
                                               bool shared);

// Throws usage (64) naming `option` when the backend is etcd://.
void refuse_on_etcd(Context& ctx, const char* option);

}  // namespace nxlock::cli
