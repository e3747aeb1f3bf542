// Releasing run-locked's lock at the end: at once, or kept until --hold's end;
// retried through backend failures while the lock is valid.
#include <string>
#include <vector>

#include "lock/lease_lock.hpp"
#include "run/stages.hpp"
#include "util/error.hpp"

namespace nxlock::run {

using util::Micros;

lock::Verdict release_held(const HeldLock& held, const ReleaseStep& release_one) {
  return release_with_retries(held.value, held.maybe_ours, held.valid_until, release_one);
}

std::vector<std::string> release_values(const lock::Lockable& lock, const HeldLock& held,
                                        const std::string* planned) {
  std::vector<std::string> values{held.value};
  values.insert(values.end(), held.maybe_ours.begin(), held.maybe_ours.end());
  if (planned != nullptr) {
    values.push_back(*planned);
  }
  if (lock.slot() > 0) {
    for (auto& value : values) {
      value = lock::slot_value(lock.slot(), value);
    }
  }
  return values;
}

Released release(LockedRun& run, bool keep_for_hold) {
  Released released;
  ReleaseStep release_one = [&](const std::string& value) { return run.lock.release(value); };
  if (keep_for_hold && run.options.hold > Micros(0)) {
    release_one = [&](const std::string& value) {
      released.kept_value.clear();
      lock::Kept kept = run.lock.release_after(value, run.options.acquired_at + run.options.hold);
      released.kept_value = std::move(kept.value);
      return kept.verdict;
    };
  }
  try {
    released.verdict = release_held(run.held, release_one);
  } catch (const util::Error& e) {
    // The child's status is what cron reports: a release that got no answer
    // is for the caller to mention (the lock then simply expires).
    released.error = e.what();
  }
  return released;
}

}  // namespace nxlock::run
