// QuorumLock: the documented steps on every server at once, held by a majority.
// This file: the arithmetic of a majority and its window, the lock's servers,
// and the holder's details; the steps are in quorum_round.cpp (one round),
// quorum_acquire.cpp (the wait), quorum_release.cpp and quorum_status.cpp.
#include "lock/quorum/quorum.hpp"

#include <algorithm>
#include <functional>

#include "store/keys.hpp"
#include "lock/quorum/quorum_fanout.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using namespace detail;  // the fan-out: ask(), Decision, Replies (quorum_fanout.hpp)
using util::Error;
using util::ErrorKind;
using util::Micros;

// At the end, queued jobs (the holder records) get this long to finish.
constexpr Micros k_exit_patience{500'000};

}  // namespace

std::size_t majority_of(std::size_t servers) {
  return servers / 2 + 1;
}

std::optional<std::int64_t> quorum_token(std::vector<std::int64_t> fences, std::size_t servers) {
  if (fences.empty()) {
    return std::nullopt;
  }
  std::sort(fences.begin(), fences.end(), std::greater<>());
  return fences[std::min(majority_of(servers), fences.size()) - 1];
}

Micros drift_margin(std::int64_t ttl) {
  return Micros(2'000) + Micros(ttl * 10'000);
}

Micros validity_end(Micros started, std::int64_t ttl) {
  return started + Micros(ttl * 1'000'000) - drift_margin(ttl);
}

bool quorum_holds(std::size_t acquired, std::size_t servers, Micros started, Micros ended,
                  std::int64_t ttl) {
  return acquired >= majority_of(servers) && ended < validity_end(started, ttl);
}

QuorumLock::QuorumLock(std::vector<QuorumServer> servers, Clock& clock, std::string key)
    : m_clock(clock), m_key(std::move(key)) {
  if (servers.size() < 2) {
    throw Error(ErrorKind::internal, "quorum", "needs at least two servers");
  }
  store::check_lock_key(m_key);  // as Lock does, before any server is asked
  m_channels = detail::start_channels(std::move(servers), m_key);
}

QuorumLock::~QuorumLock() {
  // Queued jobs finish first (the holder record of `lock` must be written), but
  // a server that does not answer keeps nobody past a bounded wait: its worker
  // is then left to finish (or be ended by the process's exit) on its own.
  wait_for_workers(k_exit_patience);
  detail::stop_channels(m_channels);
}

bool QuorumLock::wait_for_workers(Micros timeout) {
  return detail::wait_idle(m_channels, timeout);
}

void QuorumLock::set_deadline(std::optional<Micros> monotonic_deadline) {
  m_deadline = monotonic_deadline;
}

Error QuorumLock::no_majority(std::size_t answered,
                              const std::vector<std::optional<Error>>& errors) const {
  std::string why = "only " + std::to_string(answered) + " of " +
                    std::to_string(m_channels.size()) + " servers answered (a majority is " +
                    std::to_string(majority_of(m_channels.size())) + ")";
  for (const auto& error : errors) {
    if (error) {
      why += ": " + std::string(error->what());
      break;
    }
  }
  return Error(ErrorKind::unavailable, "lock '" + m_key + "'", why);
}

void QuorumLock::record_holder(Holder holder) {
  // Advisory details: the caller (the job, or `lock`'s output) need not wait for
  // any server; the jobs run in order on each server's queue, and the
  // destructor gives them a bounded time to finish. They carry our token: a
  // server that took the lock after the majority did keeps a counter of its own.
  holder.fence = m_fence;
  for (auto& channel : m_channels) {
    post(*channel, [holder](QuorumChannel& c) {
      try {
        c.open().record_holder(holder);
      } catch (const std::exception& e) {
        util::trace(std::string("holder details not recorded: ") + e.what());
      }
    });
  }
}

std::optional<Holder> QuorumLock::holder_of(std::string_view value) {
  const std::size_t majority = majority_of(m_channels.size());
  const std::string wanted(value);
  const auto replies = ask<std::optional<Holder>>(
      m_channels, [wanted](QuorumChannel& channel) { return channel.open().holder_of(wanted); },
      // Every holder's record is on every server it took: one is enough, and a
      // majority without one says there is none.
      [majority](const Replies<std::optional<Holder>>& so_far) {
        for (const auto& holder : so_far.values) {
          if (holder && *holder) {
            return Decision::done_now;
          }
        }
        return so_far.answered >= majority ? Decision::done_after_grace : Decision::open;
      },
      m_deadline, everyone());
  for (const auto& holder : replies.values) {
    if (holder && *holder) {
      return *holder;
    }
  }
  return std::nullopt;
}

}  // namespace nxlock::lock
