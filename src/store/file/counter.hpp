// The embedded store's one fencing counter (STORE/fence), shared by every key: see
// docs/STORE-FORMAT.md, "Fencing tokens".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "util/fd.hpp"

namespace nxlock::store {

// The counter, opened (created with `mode` if missing) and locked for as long
// as this object lives. Taken by owning steps only, always after their stripe
// lock and never before another: no step waits for a stripe while holding it.
class FenceCounter {
 public:
  FenceCounter(int store_fd, const std::string& store_path, mode_t mode, bool durable);

  // The next token, max(last + 1, floor), written before it is returned: a
  // token is never issued twice, even if the lock's write that follows fails.
  // `floor` is the clock in microseconds, so a counter that was deleted or
  // lost never makes a token go back.
  std::int64_t issue(std::int64_t floor);

 private:
  std::string m_path;
  bool m_durable;
  util::UniqueFd m_fd;
};

}  // namespace nxlock::store
