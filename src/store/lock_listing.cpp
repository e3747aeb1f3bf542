// The glob every backend that has no MATCH of its own lists with (lock_listing.hpp).
#include "store/lock_listing.hpp"

#include <fnmatch.h>

namespace nxlock::store {

bool glob_match(std::string_view pattern, std::string_view key) {
  if (pattern == "*") {
    return true;
  }
  if (key.find('\0') != std::string_view::npos || pattern.find('\0') != std::string_view::npos) {
    return false;
  }
  return ::fnmatch(std::string(pattern).c_str(), std::string(key).c_str(), 0) == 0;
}

}  // namespace nxlock::store
