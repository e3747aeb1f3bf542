// Retrying a release through backend failures, while the lock is valid.
#include "run/release_retry.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>

#include "util/error.hpp"
#include "util/random.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// The release retries for this long at most; past it, the lock is left to
// expire at its timestamp rather than keep the job's caller waiting.
constexpr Micros k_release_patience{10'000'000};

}  // namespace

lock::Verdict release_with_retries(const std::string& value,
                                   const std::vector<std::string>& maybe_ours,
                                   util::Micros valid_until, const ReleaseStep& release_one) {
  // No deadline cap here: the compare-and-delete is decided by the server on
  // the value alone, so a late answer is still a true one. Retries stop when
  // the lock could expire anyway, or after k_release_patience.
  const Micros give_up = std::min(valid_until, util::mono_now() + k_release_patience);
  Micros backoff = k_backoff_first;
  bool unanswered = false;  // an earlier attempt's reply was lost: it may have deleted the key
  for (;;) {
    try {
      const lock::Verdict verdict =
          lock::on_value_or_earlier(value, maybe_ours, release_one);
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

}  // namespace nxlock::run
