// QuorumWatches: arming every server's watch, and waiting on them all at once.
#include "lock/quorum/quorum_watch.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::lock::detail {

namespace {

using util::Error;
using util::ErrorKind;
using util::Micros;

void signal_eventfd(int fd) {
  const std::uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

// Waits on every armed watcher at once (a thread each, all stopped through one
// eventfd when the first sees a change), on `interrupt_fd` and on `timeout`.
// A watcher that fails is dropped; the caller arms it again later.
store::WaitResult wait_any(std::vector<std::shared_ptr<store::Watcher>>& watchers, Micros timeout,
                           int interrupt_fd) {
  if (std::none_of(watchers.begin(), watchers.end(), [](const auto& w) { return w != nullptr; })) {
    return util::readable_before(interrupt_fd, util::mono_now() + timeout)
               ? store::WaitResult::interrupted
               : store::WaitResult::timed_out;
  }
  util::UniqueFd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  util::UniqueFd changed(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop || !changed) {
    throw Error(ErrorKind::internal, "eventfd", std::strerror(errno));
  }
  const auto watch_one = [&](std::size_t i) {
    try {
      if (watchers[i]->wait(timeout, stop.get()) == store::WaitResult::changed) {
        signal_eventfd(changed.get());
      }
    } catch (const std::exception& e) {
      util::trace(std::string("quorum: watch dropped: ") + e.what());
      watchers[i].reset();
    }
  };
  // However the wait ends (poll may throw), every watch thread is stopped and joined first.
  struct Threads {
    int stop_fd;
    std::vector<std::thread> running;
    ~Threads() {
      signal_eventfd(stop_fd);
      for (auto& thread : running) {
        thread.join();
      }
    }
  };
  pollfd fds[2] = {{changed.get(), POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
  {
    Threads threads{stop.get(), {}};
    for (std::size_t i = 0; i < watchers.size(); ++i) {
      if (!watchers[i]) {
        continue;
      }
      try {
        threads.running.emplace_back(watch_one, i);
      } catch (const std::system_error&) {
        // No thread to be had: a poll tick decides for this one.
      }
    }
    util::poll_until(fds, 2, util::mono_now() + timeout);
  }
  if ((fds[1].revents & POLLIN) != 0) {
    return store::WaitResult::interrupted;
  }
  return util::readable_before(changed.get(), util::mono_now()) ? store::WaitResult::changed
                                                                : store::WaitResult::timed_out;
}

}  // namespace

bool QuorumWatches::arm(const std::vector<bool>& answered, std::optional<Micros> deadline) {
  const std::size_t n = m_channels.size();
  bool newly_armed = false;
  std::vector<bool> unwatched(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    unwatched[i] = !m_watchers[i] && answered[i];
  }
  if (std::find(unwatched.begin(), unwatched.end(), true) != unwatched.end()) {
    const auto armed_now = ask<std::shared_ptr<store::Watcher>>(
        m_channels,
        [](QuorumChannel& channel) {
          channel.open();
          return std::shared_ptr<store::Watcher>(channel.store->watch(channel.key));
        },
        [](const Replies<std::shared_ptr<store::Watcher>>&) { return Decision::open; }, deadline,
        unwatched, util::mono_now() + k_best_effort_patience);
    for (std::size_t i = 0; i < n; ++i) {
      if (armed_now.values[i] && *armed_now.values[i]) {
        m_watchers[i] = *armed_now.values[i];
        newly_armed = true;
      } else if (armed_now.errors[i]) {
        util::trace(std::string("quorum: no watch: ") + armed_now.errors[i]->what());
      }
    }
  }
  return newly_armed;
}

store::WaitResult QuorumWatches::wait(Micros timeout, int interrupt_fd) {
  const std::size_t n = m_channels.size();
  std::vector<std::shared_ptr<store::Watcher>> usable(n);
  std::vector<bool> passed(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    passed[i] = m_watchers[i] && is_idle(*m_channels[i]);
    usable[i] = passed[i] ? m_watchers[i] : nullptr;
  }
  const auto result = wait_any(usable, timeout, interrupt_fd);
  for (std::size_t i = 0; i < n; ++i) {
    if (passed[i] && !usable[i]) {
      m_watchers[i].reset();  // dropped by wait_any(): armed again later
    }
  }
  return result;
}

}  // namespace nxlock::lock::detail
