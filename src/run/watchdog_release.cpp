// The watchdog's release of the lock of an nxlock that died, once its job is gone.
#include "run/watchdog_release.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "run/release_retry.hpp"
#include "util/error.hpp"

namespace nxlock::run {

void release_for_nxlock(const ReleaseForNxlock& release,
                        const std::vector<std::string>& values, const TakenHold& take,
                        util::Micros valid_until) {
  if (!release || values.empty()) {
    return;  // left to its ttl
  }
  // The watchdog closed every descriptor: the connections it opens now must
  // not become a stdin, stdout or stderr that some message then writes to.
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) {
      open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  // the lowest free: fd itself
    }
  }
  const std::vector<std::string> earlier(values.begin() + 1, values.end());
  try {
    release_with_retries(values.front(), earlier, valid_until,
                         [&](const std::string& value) { return release(value, take); });
  } catch (const util::Error&) {
    // No answer while the lock lasted: it expires at its ttl, as if we had died too.
  } catch (const std::exception&) {
    // Nothing can be told from here; the ttl still ends the lock.
  }
}

}  // namespace nxlock::run
