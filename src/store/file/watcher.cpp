// FileWatcher: inotify on a stripe directory, or polling in slices without it.
#include "store/file/watcher.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "store/file/posix.hpp"

namespace nxlock::store {

namespace {

// Without inotify, waiters look again this often.
constexpr util::Micros k_poll_slice{200'000};

}  // namespace

using posix::fail;

FileWatcher::FileWatcher(int stripe_fd, std::string name, const std::string& stripe_path,
                         MakeFifo make_fifo, RemoveFifo remove_fifo, int shared_inotify,
                         std::function<void()> done)
    : m_name(std::move(name)),
      m_path(stripe_path),
      m_done(std::move(done)),
      m_make_fifo(std::move(make_fifo)),
      m_remove_fifo(std::move(remove_fifo)) {
  m_inotify = shared_inotify;
  if (m_inotify < 0) {
    const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOSYS || errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
        return;  // no inotify here (or the per-user limit is reached): poll instead
      }
      fail(errno, stripe_path, "inotify_init1");
    }
    m_owned_inotify.reset(fd);
    m_inotify = fd;
  }
  // A rename onto the bucket name (every write) or its unlink (the last entry
  // removed); IN_CREATE for writers that create it in place; the *_SELF events
  // because nothing can be seen once the directory itself goes away.
  const std::uint32_t mask =
      IN_MOVED_TO | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
  // Watch the directory we opened with O_NOFOLLOW, not whatever the path names now.
  const std::string via_proc = "/proc/self/fd/" + std::to_string(stripe_fd);
  int wd = ::inotify_add_watch(m_inotify, via_proc.c_str(), mask);
  if (wd < 0 && errno == ENOENT) {  // no /proc: the path, not following a last symlink
    wd = ::inotify_add_watch(m_inotify, stripe_path.c_str(), mask | IN_DONT_FOLLOW);
  }
  if (wd < 0) {
    if (errno == ENOSPC) {  // the per-user watch limit: poll instead
      return;
    }
    fail(errno, stripe_path, "inotify_add_watch");
  }
  m_wd = wd;
}

FileWatcher::~FileWatcher() {
  if (m_fifo && m_remove_fifo) {
    m_fifo.reset();
    m_remove_fifo(m_ticket);
  }
  if (watching() && !m_owned_inotify) {
    // The instance stays open (see the class comment); only our watch goes.
    ::inotify_rm_watch(m_inotify, m_wd);
  }
  if (m_done) {
    m_done();
  }
}

void FileWatcher::only_for(std::string ticket) {
  if (!m_make_fifo || m_fifo) {
    return;
  }
  m_ticket = std::move(ticket);
  m_fifo = m_make_fifo(m_ticket);  // invalid if it could not be made: the key's changes wake us
}

// Empties our FIFO (the wake-ups are only a signal).
static void drain_fifo(int fd) {
  char buffer[64];
  while (::read(fd, buffer, sizeof buffer) > 0) {
  }
}

WaitResult FileWatcher::wait(util::Micros timeout, int interrupt_fd) {
  const util::Micros start = util::mono_now();
  timeout = std::max(timeout, util::Micros(0));
  const util::Micros deadline =
      timeout >= util::Micros::max() - start ? util::Micros::max() : start + timeout;
  for (;;) {
    const util::Micros remaining = std::max(deadline - util::mono_now(), util::Micros(0));
    // A queued waiter behind another one sleeps on its FIFO alone: the key's
    // changes are the first waiter's business, and would cost every waiter a
    // wake-up per change.
    const bool see_key = m_first || !m_fifo;
    const util::Micros slice =
        watching() || !see_key ? remaining : std::min(remaining, k_poll_slice);
    pollfd fds[3] = {};
    nfds_t count = 0;
    if (interrupt_fd >= 0) {
      fds[count++] = {interrupt_fd, POLLIN, 0};
    }
    const nfds_t fifo_at = count;
    if (m_fifo) {
      fds[count++] = {m_fifo.get(), POLLIN, 0};
    }
    const nfds_t inotify_at = count;
    if (watching() && see_key) {
      fds[count++] = {m_inotify, POLLIN, 0};
    }
    const int ready = ::poll(fds, count, util::poll_timeout_ms(slice));
    if (ready < 0) {
      if (errno == EINTR) {
        continue;  // a signal: its handler may have written interrupt_fd, look again
      }
      fail(errno, m_path, "poll");
    }
    if (interrupt_fd >= 0 && fds[0].revents != 0) {
      return WaitResult::interrupted;  // left unread: it belongs to the caller
    }
    if (m_fifo && fds[fifo_at].revents != 0) {
      drain_fifo(m_fifo.get());
      return WaitResult::changed;
    }
    if (inotify_at < count && fds[inotify_at].revents != 0 && drain_events()) {
      return WaitResult::changed;
    }
    if (ready == 0 || (!watching() && see_key)) {
      if (slice < remaining) {
        return WaitResult::changed;  // polling: one slice passed, the caller looks again
      }
      if (util::mono_now() >= deadline) {
        return WaitResult::timed_out;
      }
    }
  }
}

bool FileWatcher::drain_events() {
  bool relevant = false;
  bool watch_gone = false;
  alignas(inotify_event) char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(m_inotify, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        if (watch_gone) {
          m_wd = -1;  // the kernel dropped it: nothing to remove, poll from now on
        }
        return relevant;
      }
      fail(errno, m_path, "read inotify events");
    }
    std::size_t at = 0;
    while (at + sizeof(inotify_event) <= static_cast<std::size_t>(n)) {
      inotify_event event{};
      std::memcpy(&event, buffer + at, sizeof event);
      const char* name = buffer + at + sizeof event;
      const std::string_view event_name(name, ::strnlen(name, event.len));
      at += sizeof event + event.len;
      // A shared instance may still hold events of an earlier watcher's watch.
      if ((event.mask & IN_Q_OVERFLOW) != 0) {
        relevant = true;  // events were lost, ours perhaps
        continue;
      }
      if (event.wd != m_wd) {
        continue;
      }
      if ((event.mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0 ||
          event_name == m_name) {
        relevant = true;
      }
      watch_gone = watch_gone || (event.mask & IN_IGNORED) != 0;
    }
  }
}

}  // namespace nxlock::store
