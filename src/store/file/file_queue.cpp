// FileQueue, the embedded store's waiters' queue (WaitersQueue): a store entry of waiters in
// arrival order, leased on CLOCK_BOOTTIME, each with a FIFO a release writes into to wake it
// (see file_queue.hpp and docs/STORE-FORMAT.md, "Operations").
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "store/fenced_steps.hpp"
#include "store/file/file_queue.hpp"
#include "store/file/owner.hpp"
#include "store/file/watcher.hpp"
#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using record::Entry;

struct QueuedWaiter {
  std::string ticket;
  std::int64_t arrival = 0;      // queue_now() microseconds
  std::int64_t lease_until = 0;  // queue_now() microseconds
};

// The clock of the queue's arrivals and leases: CLOCK_BOOTTIME, one clock for
// every process of this boot, which no clock step, NTP slew or faked wall
// clock moves. On the wall clock, a waiter whose clock ran behind renewed its
// lease into the others' past and lost its place at every look.
std::int64_t queue_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1'000;
}

// A line's boot: its times mean nothing on another boot. Dashes go, so the
// line stays four words.
std::string queue_boot() {
  std::string boot = owner::this_boot();
  std::erase(boot, '-');
  return boot.empty() ? "-" : boot;
}

// A queue entry's waiters; lines that do not parse are left out (and so
// dropped by the next write): the queue is advice, the lock does not depend on it.
// A line of another boot, or of an older nxlock (three words, wall-clock
// times), has lapsed: its waiter, if it still waits, joins again at its next look.
std::vector<QueuedWaiter> parse_queue(const std::string* text) {
  static const std::string this_boot = queue_boot();
  std::vector<QueuedWaiter> waiters;
  if (text == nullptr) {
    return waiters;
  }
  std::size_t at = 0;
  while (at < text->size()) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) {
      end = text->size();
    }
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    char ticket[64] = {};
    long long arrival = 0;
    long long lease = 0;
    char boot[64] = {};
    const int words =
        std::sscanf(line.c_str(), "%63s %lld %lld %63s", ticket, &arrival, &lease, boot);
    if (words >= 3 && ticket[0] == 'q') {
      waiters.push_back({ticket, arrival, words == 4 && this_boot == boot ? lease : 0});
    }
  }
  return waiters;
}

std::string encode_queue(const std::vector<QueuedWaiter>& waiters) {
  static const std::string this_boot = queue_boot();
  std::string text;
  for (const auto& w : waiters) {
    text += w.ticket + " " + std::to_string(w.arrival) + " " + std::to_string(w.lease_until) + " " +
            this_boot + "\n";
  }
  return text;
}

// A ticket as a file name: what make_ticket() makes (lock/queue_ticket.hpp),
// and nothing that could name another path ("q" first: never "." or "..").
bool ticket_name_ok(std::string_view ticket) {
  return !ticket.empty() && ticket.size() < 64 && ticket.front() == 'q' &&
         std::all_of(ticket.begin(), ticket.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '.' || c == '_' || c == '-';
         });
}

const std::string* queue_value_of(const Entry* entry) {
  return entry == nullptr ? nullptr : &entry->value;
}

}  // namespace

std::vector<std::string> FileQueue::live_tickets(const std::string& queue_text) {
  const std::int64_t now = queue_now();
  std::vector<std::string> live;
  for (auto& waiter : parse_queue(&queue_text)) {
    if (waiter.lease_until >= now) {
      live.push_back(std::move(waiter.ticket));
    }
  }
  return live;
}

util::UniqueFd FileQueue::make_fifo(const std::string& ticket) {
  if (!ticket_name_ok(ticket)) {
    return {};
  }
  try {
    const int dir = m_core.directory().wait_dir(true);
    if (dir < 0 || ::mkfifoat(dir, ticket.c_str(), m_core.directory().file_mode()) != 0) {
      return {};
    }
    // Read and write: holding a writer ourselves, the FIFO never reports a
    // hang-up when a releaser's write end closes; and as long as we hold it
    // open, a releaser's open finds a reader (no ENXIO): we are alive.
    const int fd = ::openat(dir, ticket.c_str(), O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      ::unlinkat(dir, ticket.c_str(), 0);
      return {};
    }
    // mkfifo() honours the umask: the store's bits, so the group's releasers can wake us.
    (void)::fchmod(fd, m_core.directory().file_mode());
    return util::UniqueFd(fd);
  } catch (const util::Error&) {
    return {};  // no FIFO: this waiter is woken by the key's changes instead
  }
}

void FileQueue::remove_fifo(const std::string& ticket) {
  if (ticket_name_ok(ticket) && m_core.directory().wait() >= 0) {
    ::unlinkat(m_core.directory().wait(), ticket.c_str(), 0);
  }
}

void FileQueue::mutate(std::string_view key, bool may_insert, const Buckets::Decide& decide) {
  leave_now();
  m_core.buckets().update(key, may_insert, decide);
}

void FileQueue::drop_from_queue(std::string_view queue, const std::vector<std::string>& tickets) {
  std::string encoded;
  mutate(queue, false, [&](const Entry* current) {
    auto waiters = parse_queue(queue_value_of(current));
    const auto before = waiters.size();
    std::erase_if(waiters, [&](const QueuedWaiter& w) {
      return std::find(tickets.begin(), tickets.end(), w.ticket) != tickets.end();
    });
    if (waiters.size() == before) {
      return Change{};
    }
    if (waiters.empty()) {
      return Change{Change::Kind::erase, {}};
    }
    encoded = encode_queue(waiters);
    return Change{Change::Kind::put, encoded};
  });
}

void FileQueue::leave_now() {
  if (!m_leaving) {
    return;
  }
  const Leaving leaving = std::move(*m_leaving);
  m_leaving.reset();
  try {
    drop_from_queue(leaving.queue, {leaving.ticket});
  } catch (const util::Error& e) {
    util::trace(std::string("queue not left (the lease lapses): ") + e.what());
  }
}

bool FileQueue::reap_fifo(const std::string& ticket) {
  if (!ticket_name_ok(ticket) || m_core.directory().wait_dir(false) < 0) {
    return false;
  }
  const int fd = ::openat(m_core.directory().wait(), ticket.c_str(),
                          O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return false;  // its waiter holds it open: alive
  }
  if (errno == ENXIO) {  // nobody holds it open: that waiter died
    ::unlinkat(m_core.directory().wait(), ticket.c_str(), 0);
    return true;
  }
  return errno == ENOENT;
}

void FileQueue::wake_first(std::string_view queue) {
  const auto text = m_steps.get(queue);
  if (!text || m_core.directory().wait_dir(false) < 0) {
    return;
  }
  const std::int64_t now = queue_now();
  std::vector<std::string> dead;
  // In arrival order: waiters that died (their FIFO open by nobody) are dropped
  // with their FIFOs, lapsed ones that live are passed over (their next look
  // renews them), and the first live one gets the wake-up.
  for (const auto& waiter : parse_queue(&*text)) {
    if (!ticket_name_ok(waiter.ticket)) {
      continue;
    }
    const int fd = ::openat(m_core.directory().wait(), waiter.ticket.c_str(),
                            O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENXIO) {
        ::unlinkat(m_core.directory().wait(), waiter.ticket.c_str(), 0);
        dead.push_back(waiter.ticket);
        continue;
      }
      if (waiter.lease_until < now) {
        if (errno == ENOENT) {
          dead.push_back(waiter.ticket);
        }
        continue;
      }
      break;  // not watching yet: it looks again by itself once it does
    }
    util::UniqueFd fifo(fd);
    if (waiter.lease_until < now) {
      continue;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
      const char byte = '1';
      (void)!::write(fd, &byte, 1);  // full (EAGAIN): it has been woken already
    }
    break;
  }
  if (!dead.empty()) {
    drop_from_queue(queue, dead);
  }
}

bool FileQueue::may_go_first(std::string_view queue, std::string_view ticket, bool& in_line) {
  const std::int64_t now = queue_now();
  const auto text = m_steps.get(queue);
  const auto waiters = parse_queue(text ? &*text : nullptr);
  const auto live = std::find_if(waiters.begin(), waiters.end(), [&](const QueuedWaiter& w) {
    return w.lease_until >= now || w.ticket == ticket;
  });
  in_line = live != waiters.end();
  return live == waiters.end() || live->ticket == ticket;
}

std::string FileQueue::keep_in_line(std::string_view queue, std::string_view ticket, bool waiting,
                                    util::Micros lease, bool& pruned, std::int64_t& ahead) {
  std::string first;
  std::string encoded;
  std::vector<std::string> lapsed;
  const std::int64_t now = queue_now();
  mutate(queue, waiting, [&](const Entry* current) {
    auto waiters = parse_queue(queue_value_of(current));
    const auto before = waiters.size();
    std::erase_if(waiters, [&](const QueuedWaiter& w) {
      const bool gone = w.lease_until < now && w.ticket != ticket;
      if (gone) {
        lapsed.push_back(w.ticket);
      }
      return gone;
    });
    pruned = waiters.size() != before;
    bool changed = pruned;
    if (waiting) {
      const auto ours = std::find_if(waiters.begin(), waiters.end(),
                                     [&](const QueuedWaiter& w) { return w.ticket == ticket; });
      if (ours == waiters.end()) {
        waiters.push_back({std::string(ticket), now, now + lease.count()});
        changed = true;
      } else if (ours->lease_until - now < lease.count() / 2) {
        // Renewed only once half the lease is gone: a write is a new record
        // and a rename, and a waiter looks twice as often as that.
        ours->lease_until = now + lease.count();
        changed = true;
      }
    }
    if (!waiters.empty()) {
      first = waiters.front().ticket;
    }
    ahead = std::find_if(waiters.begin(), waiters.end(),  // live ones: the lapsed are gone
                         [&](const QueuedWaiter& w) { return w.ticket == ticket; }) -
            waiters.begin();
    if (!changed) {
      return Change{};
    }
    if (waiters.empty()) {
      return Change{Change::Kind::erase, {}};
    }
    encoded = encode_queue(waiters);
    return Change{Change::Kind::put, encoded};
  });

  for (const auto& gone : lapsed) {
    reap_fifo(gone);  // a dead waiter's FIFO goes with its place in line
  }
  return first;
}

WaitersQueue::QueuedSet FileQueue::take_or_queue(std::string_view key, std::string_view value,
                                                 std::string_view counter, std::string_view queue,
                                                 std::string_view ticket, bool waiting,
                                                 util::Micros lease, StepPolicy policy) {
  // The queue's upkeep, then the SETNX: not one atomic step, and it need not
  // be: only the first waiter passes the gate, and it stays first until it
  // leaves the queue after its SETNX, so nobody passes the gate meanwhile.
  // It leaves at this store's next write (or close): with run-locked, the
  // holder's record, once the job runs; the rewrite of the line is then not
  // between the lock and the job. Its release is a write, so the line is
  // left before the release wakes the next.
  QueuedSet result;
  // A free lock with nobody in line before us (the common case: no contention)
  // is tried at once, with no write to the queue.
  {
    bool in_line = false;
    if (may_go_first(queue, ticket, in_line)) {
      if (const auto fence = m_steps.set_if_absent(key, value, counter, policy).fence) {
        if (in_line) {
          m_leaving = Leaving{std::string(queue), std::string(ticket)};
        }
        result.outcome = QueuedSet::Outcome::set;
        result.fence = fence;
        return result;
      }
      if (!waiting) {
        result.outcome = QueuedSet::Outcome::held;
        result.current = m_steps.get(key);
        return result;
      }
    }
  }

  bool pruned = false;
  const std::string first = keep_in_line(queue, ticket, waiting, lease, pruned, result.ahead);
  if (!first.empty() && first != ticket) {
    result.outcome = QueuedSet::Outcome::behind;
    result.current = m_steps.get(key);
    if (pruned && !result.current) {
      wake_first(queue);  // the one we dropped may have taken its wake-up with it
    }
    return result;
  }
  // First in line (or the line is empty), and the lock was held a moment ago:
  // once more, now that our place is written.
  result = unqueued(m_steps, key, value, counter, policy);
  if (result.outcome == QueuedSet::Outcome::set && !first.empty()) {
    m_leaving = Leaving{std::string(queue), std::string(ticket)};
  }
  return result;
}

bool FileQueue::release_and_wake(std::string_view key, std::string_view expected,
                                 const Fence& fence, std::string_view queue, StepPolicy policy) {
  const bool deleted = m_steps.compare_and_delete(key, expected, std::optional(fence), policy);
  if (deleted) {
    wake_first(queue);
  }
  return deleted;
}

void FileQueue::leave(std::string_view key, std::string_view queue, std::string_view ticket) {
  drop_from_queue(queue, {std::string(ticket)});
  if (!m_steps.get(key)) {
    wake_first(queue);  // we may have been the one woken
  }
}

std::unique_ptr<Watcher> FileQueue::watch_turn(std::string_view key, std::string ticket) {
  if (m_core.record_owner()) {
    // The lock a waiter takes records its owner, this process as /proc tells
    // it: read now, not between the release and the job (the handoff).
    owner::self();
  }
  auto watcher = watch_key(key);
  watcher->only_for(std::move(ticket));
  return watcher;
}

std::unique_ptr<FileWatcher> FileQueue::watch_key(std::string_view key) {
  return m_core.make_watcher(
      key, [this](const std::string& ticket) { return make_fifo(ticket); },
      [this](const std::string& ticket) { remove_fifo(ticket); });
}

}  // namespace nxlock::store
