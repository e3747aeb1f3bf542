// Deadline: the instant a connect or an exchange must be done by, and how to say it passed.
#pragma once

#include <string>

#include "util/time.hpp"

namespace nxlock::store::net {

struct Deadline {
  util::Micros at;  // monotonic
  double seconds;   // the budget it gave
  bool capped;      // the cap (the lock's expiry), not --io-timeout, set it

  // "timed out after 2s", and whose deadline it was. A capped deadline with
  // nothing left ("after 0s") was no wait at all: the lock had run out of time.
  std::string passed() const {
    const auto budget = util::Micros(static_cast<long long>(seconds * 1e6));
    if (capped && budget < util::Micros(1000)) {
      return "gave up at once: the lock it serves had reached its deadline";
    }
    std::string text = "timed out after " + util::seconds_text(budget);
    if (capped) {
      text += " (the deadline of the lock it serves)";
    }
    return text;
  }
};

}  // namespace nxlock::store::net
