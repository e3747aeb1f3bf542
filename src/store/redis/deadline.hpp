// Deadline: the instant a connect or an exchange must be done by, and how to say it passed.
#pragma once

#include <string>

#include "util/time.hpp"

namespace nxlock::store::redis {

struct Deadline {
  util::Micros at;  // monotonic
  double seconds;   // the budget it gave
  bool capped;      // the cap (the lock's expiry), not --io-timeout, set it

  // "timed out after 2 s", and whose deadline it was.
  std::string passed() const {
    std::string text = "timed out after " +
                       util::seconds_text(util::Micros(static_cast<long long>(seconds * 1e6)));
    if (capped) {
      text += " (the deadline of the lock it serves)";
    }
    return text;
  }
};

}  // namespace nxlock::store::redis
