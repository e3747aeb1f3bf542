// poll(2) until a monotonic deadline, through signals: the one wait every
// blocking step of nxlock is built on.
#pragma once

#include <poll.h>

#include "util/time.hpp"

namespace nxlock::util {

// Polls `fds` until one is ready or `monotonic_deadline` (mono_now() time)
// passes. A signal (EINTR) polls again for what is left of the time: the
// deadline is absolute. The number of ready entries, or 0 once the deadline
// has passed; Micros::max() waits without end. Throws Error(internal) if
// poll itself fails.
int poll_until(pollfd* fds, nfds_t count, Micros monotonic_deadline);

// True if `fd` becomes readable (or hangs up) before `monotonic_deadline`.
bool readable_before(int fd, Micros monotonic_deadline);

}  // namespace nxlock::util
