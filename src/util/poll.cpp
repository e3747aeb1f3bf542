// poll_until: poll(2) with an absolute monotonic deadline, retried through EINTR.
#include "util/poll.hpp"

#include <cerrno>
#include <cstring>

#include "util/error.hpp"

namespace nxlock::util {

int poll_until(pollfd* fds, nfds_t count, Micros monotonic_deadline) {
  for (;;) {
    const Micros left = monotonic_deadline == Micros::max() ? Micros::max()
                                                            : monotonic_deadline - mono_now();
    const int timeout = left == Micros::max() ? -1 : poll_timeout_ms(left);
    const int ready = ::poll(fds, count, timeout);
    if (ready > 0) {
      return ready;
    }
    if (ready == 0) {
      if (timeout == 0 || mono_now() >= monotonic_deadline) {
        return 0;
      }
      continue;  // woke a little early (the clock's granularity): wait the rest
    }
    if (errno != EINTR) {
      throw Error(ErrorKind::internal, "poll", std::strerror(errno));
    }
  }
}

bool readable_before(int fd, Micros monotonic_deadline) {
  pollfd entry{fd, POLLIN, 0};
  return poll_until(&entry, 1, monotonic_deadline) > 0;
}

}  // namespace nxlock::util
