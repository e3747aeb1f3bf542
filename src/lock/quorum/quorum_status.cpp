// QuorumLock::status: the majority's view of the lock, and every server's.
#include <algorithm>
#include <functional>
#include <map>

#include "lock/quorum/quorum.hpp"
#include "lock/quorum/quorum_fanout.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using namespace detail;  // the fan-out: ask(), Decision, Replies (quorum_fanout.hpp)
using util::ErrorKind;
using util::Micros;

// status shows every server's state: a slow one (a TLS handshake on a loaded
// host) gets longer to be shown as it is.
constexpr Micros k_status_grace{1'000'000};

}  // namespace

Status QuorumLock::status() {
  const std::size_t n = m_channels.size();
  const std::size_t majority = majority_of(n);
  const Micros reading = m_clock.now();
  const auto replies = ask<Status>(
      m_channels,
      [reading](QuorumChannel& channel) {
        channel.clock.set(reading);
        return channel.open().status();
      },
      // Decided once a majority holds one value, or once none can and a majority answered.
      [majority](const Replies<Status>& so_far) {
        std::map<std::string, std::size_t> counts;
        std::size_t most = 0;
        for (const auto& status : so_far.values) {
          if (status && status->state != Status::State::free) {
            most = std::max(most, ++counts[status->value]);
          }
        }
        const bool decided =
            most >= majority || (so_far.answered >= majority && most + so_far.pending < majority);
        return decided ? Decision::done_after_grace : Decision::open;
      },
      m_deadline, everyone(), std::nullopt, k_status_grace);
  const auto& statuses = replies.values;
  const auto& errors = replies.errors;

  std::vector<ServerView> views;  // each server's answer, for out.servers
  std::size_t answered = 0;
  // Per value: how many servers hold it, how many hold it expired, and the first that has it.
  std::map<std::string, std::size_t> held;
  std::map<std::string, std::size_t> expired;
  std::map<std::string, std::size_t> first;
  std::optional<std::size_t> first_foreign;
  for (std::size_t i = 0; i < n; ++i) {
    ServerView view;
    view.server = m_channels[i]->spec.name;
    if (errors[i]) {
      // A minority holding what is not a lock cannot outvote a majority's holder;
      // without such a majority, its error is the answer (below).
      const bool foreign = errors[i]->kind() == ErrorKind::data;
      if (!foreign && errors[i]->kind() != ErrorKind::unavailable) {
        throw *errors[i];
      }
      view.state = foreign ? ServerView::State::foreign : ServerView::State::unavailable;
      view.error = errors[i]->what();
      if (foreign && !first_foreign) {
        first_foreign = i;
      }
      answered += foreign ? 1 : 0;
      views.push_back(std::move(view));
      continue;
    }
    ++answered;
    const Status& status = *statuses[i];
    view.value = status.value;
    switch (status.state) {
      case Status::State::free:
        view.state = ServerView::State::free;
        break;
      case Status::State::expired:
        view.state = ServerView::State::expired;
        ++expired[status.value];
        first.emplace(status.value, i);
        break;
      case Status::State::held:
        view.state = ServerView::State::held;
        ++held[status.value];
        first.emplace(status.value, i);
        break;
    }
    views.push_back(std::move(view));
  }

  const auto majority_value = [&](const std::map<std::string, std::size_t>& counts) {
    for (const auto& [value, count] : counts) {
      if (count >= majority_of(n)) {
        return std::optional<std::string>(value);
      }
    }
    return std::optional<std::string>();
  };
  // The latest token the quorum issued (quorum_token), of every server that
  // answered: a holder that took no token (a page client) or lost a server to
  // one moves no counter back. A server holding what is not a lock is asked for
  // its counter apart (no take succeeds over such a value: it still says what
  // its last take was given), only here, where it is needed.
  const auto latest_token = [&] {
    std::vector<std::int64_t> fences;
    for (std::size_t i = 0; i < n; ++i) {
      if (statuses[i] && statuses[i]->fence) {
        fences.push_back(*statuses[i]->fence);
      } else if (errors[i] && errors[i]->kind() == ErrorKind::data) {
        try {
          if (const auto fence = m_channels[i]->open().latest_token()) {
            fences.push_back(*fence);
          }
        } catch (const util::Error& e) {
          util::trace(std::string("a foreign value's token not read: ") + e.what());
        }
      }
    }
    return quorum_token(std::move(fences), n);
  };
  Status out;
  out.now_seconds = util::whole_seconds(reading);
  if (const auto value = majority_value(held)) {
    out = *statuses[first[*value]];
    out.now_seconds = util::whole_seconds(reading);
    // The holder's own record of its token, where one is there: the counters need
    // not say it (a server that took the lock after the majority did keeps its own).
    const auto recorded = std::find_if(statuses.begin(), statuses.end(), [&](const auto& status) {
      return status && status->value == *value && status->holder && status->holder->fence != 0;
    });
    out.fence = recorded != statuses.end() ? (*recorded)->holder->fence : latest_token();
    out.servers = std::move(views);
    return out;
  }
  if (first_foreign) {
    throw *errors[*first_foreign];
  }
  if (answered < majority_of(n)) {
    throw no_majority(answered, errors);
  }
  if (const auto value = majority_value(expired)) {
    out = *statuses[first[*value]];
    out.now_seconds = util::whole_seconds(reading);
    out.holder.reset();
  }
  out.fence = latest_token();
  out.servers = std::move(views);
  return out;
}

}  // namespace nxlock::lock
