// Releasing run-locked's lock at the end: at once, or kept until --hold's end;
// retried through backend failures while the lock is valid.
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include "lock/lease_lock.hpp"
#include "run/stages.hpp"
#include "util/error.hpp"
#include "util/random.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// The release retries for this long at most; past it, the lock is left to
// expire at its timestamp rather than keep the job's caller waiting.
constexpr Micros k_release_patience{10'000'000};

}  // namespace

lock::Verdict release_held(HeldLock& held, const ReleaseStep& release_one) {
  // No deadline cap here: the compare-and-delete is decided by the server on
  // the value alone, so a late answer is still a true one. Retries stop when
  // the lock could expire anyway, or after k_release_patience.
  const Micros give_up = std::min(held.valid_until, util::mono_now() + k_release_patience);
  Micros backoff = k_backoff_first;
  bool unanswered = false;  // an earlier attempt's reply was lost: it may have deleted the key
  for (;;) {
    try {
      const lock::Verdict verdict =
          lock::on_value_or_earlier(held.value, held.maybe_ours, release_one);
      return verdict == lock::Verdict::absent && unanswered ? lock::Verdict::done : verdict;
    } catch (const util::Error&) {
      unanswered = true;
      const Micros now = util::mono_now();
      if (now >= give_up) {
        throw;
      }
      const Micros pause = std::min(util::jittered(backoff), give_up - now);
      backoff = std::min(backoff * 2, k_backoff_cap);
      // A plain sleep: the job is over, and the signals we forward are blocked.
      timespec left{static_cast<time_t>(pause.count() / 1'000'000),
                    static_cast<long>(pause.count() % 1'000'000 * 1000)};
      while (nanosleep(&left, &left) != 0 && errno == EINTR) {
      }
    }
  }
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

void release(LockedRun& run, bool keep_for_hold, RunLockedOutcome& outcome) {
  ReleaseStep release_one = [&](const std::string& value) { return run.lock.release(value); };
  if (keep_for_hold && run.options.hold > Micros(0)) {
    release_one = [&](const std::string& value) {
      outcome.kept_value.clear();
      lock::Kept kept = run.lock.release_after(value, run.options.acquired_at + run.options.hold);
      outcome.kept_value = std::move(kept.value);
      return kept.verdict;
    };
  }
  try {
    outcome.released = release_held(run.held, release_one);
  } catch (const util::Error& e) {
    // The child's status is what cron reports: a release that got no answer
    // is for the caller to mention (the lock then simply expires).
    outcome.release_error = e.what();
  }
}

}  // namespace nxlock::run
