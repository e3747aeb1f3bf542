// FileListing, the embedded store's listing (LockListing): every bucket read once, without a lock.
#include <map>
#include <string>
#include <vector>

#include "store/file/file_listing.hpp"
#include "store/file/file_queue.hpp"
#include "store/file/owner.hpp"
#include "store/file/posix.hpp"
#include "store/file/store_directory.hpp"
#include "store/keys.hpp"
#include "store/lease_book.hpp"
#include "store/lock_value.hpp"
#include "util/time.hpp"

namespace nxlock::store {

namespace {

using record::Entry;

}  // namespace

void FileListing::list(std::string_view pattern, const Wanted& wanted, const Visit& visit) {
  const int data = m_core.directory().data_dir(false);
  if (data < 0) {
    return;  // a store that does not exist holds nothing, and is not created
  }
  // Every entry first: a lock's holder record and queue are entries of other
  // buckets, anywhere in the store. No stripe lock is taken: each bucket is
  // replaced whole by rename, so this reads an old or a new one, never a mix.
  std::map<std::string, Entry, std::less<>> entries;
  const std::string data_path = m_core.directory().path() + "/" + StoreDirectory::k_data_name;
  for (const auto& stripe_name : posix::hex_names(data, 2)) {
    Stripe stripe;
    stripe.path = data_path + "/" + stripe_name;
    stripe.fd = posix::open_subdir(data, stripe_name.c_str(), stripe.path, false, 0, false);
    if (!stripe.fd) {
      continue;  // gone since readdir
    }
    stripe.bucket.stripe = stripe_name;
    for (auto& bucket_name : posix::hex_names(stripe.fd.get(), 16)) {
      stripe.record_path = stripe.path + "/" + bucket_name;
      stripe.bucket.name = std::move(bucket_name);
      for (auto& entry : m_core.buckets().load(stripe)) {
        entries.emplace(entry.key, std::move(entry));
      }
    }
  }
  // The shared leases' clock, as their steps read it (file_leases.cpp).
  const std::int64_t now_seconds = util::wall_seconds();
  std::vector<ListedLock> batch;
  for (const auto& [key, entry] : entries) {
    // Details beside a lock carry its expiry (`until`): never a lock themselves.
    if (entry.until || !glob_match(pattern, key) || !wanted(key) ||
        !parse_lock_timestamp(entry.value)) {
      continue;
    }
    ListedLock& lock = batch.emplace_back();
    lock.key = key;
    lock.value = entry.value;
    lock.fence = entry.fence;
    if (const auto holder = entries.find(store::holder_key(key));
        holder != entries.end()) {
      lock.holder = holder->second.value;
    }
    lock.owner_alive = owner::keeps_held(entry);
    const auto queue = entries.find(store::waiters_queue_of(key));
    if (queue != entries.end()) {
      lock.queued = FileQueue::live_tickets(queue->second.value);
    }
    lock.waiters = static_cast<std::int64_t>(lock.queued.size());
    if (const auto leases = entries.find(store::shared_key(key)); leases != entries.end()) {
      LeaseBook book(leases->second.value);
      book.prune(now_seconds);
      if (book.holds(lock.value, lock.fence)) {
        lock.shared = book.holders();
      } else if (!book.empty()) {
        // The two buckets were read apart: a renewal between the reads moves both.
        const std::string leases_key = store::shared_key(key);
        if (LeaseSet set =
                m_leases.read({.lock = key, .counter = {}, .leases = leases_key, .queue = {}});
            set.holding && set.lock_value) {
          lock.value = *set.lock_value;
          lock.shared = std::move(set.leases);
        }
      }
    }
  }
  visit(std::move(batch));
}

}  // namespace nxlock::store
