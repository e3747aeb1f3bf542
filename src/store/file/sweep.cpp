// The sweep of abandoned locks: bounded, under a stripe lock the caller holds, and only
// of entries nxlock's owning steps wrote (see sweep.hpp).
#include "store/file/sweep.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "store/file/owner.hpp"
#include "store/file/posix.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

// The stripe's bucket names but `stripe`'s own.
std::vector<std::string> other_buckets(const Stripe& stripe) {
  std::vector<std::string> names = posix::hex_names(stripe.fd.get(), 16);
  std::erase(names, stripe.bucket.name);
  return names;
}

}  // namespace

void sweep_abandoned(Buckets& buckets, const Stripe& stripe) {
  // Bounded: a few buckets per owning step, so its cost does not grow with the
  // store. Only entries written by nxlock's owning steps are ever removed (a
  // token in their metadata): never a key of the page's clients or of `set`.
  constexpr std::size_t k_budget = 8;
  std::vector<std::string> names = other_buckets(stripe);
  if (names.size() > k_budget) {
    // A different few each time.
    const auto start = static_cast<std::size_t>(util::mono_now().count()) % names.size();
    std::rotate(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(start), names.end());
    names.resize(k_budget);
  }
  const std::int64_t now_seconds = util::wall_seconds();
  for (const auto& name : names) {
    Stripe other{record::Bucket{stripe.bucket.stripe, name},
                 stripe.path,
                 stripe.path + "/" + name,
                 util::UniqueFd(::dup(stripe.fd.get())),
                 {}};
    if (!other.fd) {
      return;
    }
    try {
      std::vector<record::Entry> entries = buckets.load(other);
      const auto before = entries.size();
      std::erase_if(entries, [&](const record::Entry& e) {
        const auto expires = e.until ? e.until : parse_lock_timestamp(e.value);
        return e.fence && expires && *expires < now_seconds && !owner::keeps_held(e);
      });
      if (entries.size() != before) {
        util::trace("removing an abandoned expired lock in " + other.record_path);
        buckets.save(other, entries);
      }
    } catch (const util::Error& e) {
      // A corrupt record is the user's to look at; it is not ours to clean.
      util::trace(std::string("sweep skipped: ") + e.what());
    }
  }
}

}  // namespace nxlock::store
