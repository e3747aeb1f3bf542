// The locks of a quorum of independent servers: the exclusive lock, by majority.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "lock/list_locks.hpp"
#include "lock/lock_space.hpp"
#include "lock/lock_spaces.hpp"
#include "store/make_store.hpp"
#include "lock/quorum/quorum.hpp"
#include "util/error.hpp"

namespace nxlock::lock {

namespace {

// list_locks() on every server of a quorum, each lock as a majority sees it:
// the value that at least N/2+1 servers hold (the latest token and holder
// record among them, the most waiters and shared holders). A lock no value of
// which a majority holds is not held by the quorum, and not listed. Throws
// util::Error(unavailable) when fewer than a majority of servers could list.
std::vector<LockRow> list_quorum_locks(const std::vector<QuorumServer>& servers,
                                       std::string_view pattern, std::int64_t now_seconds,
                                       bool with_expired) {
  const std::size_t majority = servers.size() / 2 + 1;
  // Each (key, slot, value) and the rows of the servers that hold it.
  std::map<std::tuple<std::string, int, std::string>, std::vector<LockRow>> votes;
  std::size_t listed = 0;
  std::optional<util::Error> failure;
  for (const auto& server : servers) {
    try {
      const auto store = server.open();
      for (auto& row : list_locks(*store, pattern, now_seconds, with_expired)) {
        votes[{row.key, row.slot.value_or(-1), row.value}].push_back(std::move(row));
      }
      ++listed;
    } catch (const util::Error& e) {
      failure = e;
    }
  }
  if (listed < majority) {
    throw util::Error(util::ErrorKind::unavailable, failure ? failure->subject() : "quorum",
                      std::to_string(listed) + " of " + std::to_string(servers.size()) +
                          " servers could list, fewer than a majority" +
                          (failure ? " (" + failure->reason() + ")" : ""));
  }
  std::vector<LockRow> rows;
  for (auto& [id, held] : votes) {
    if (held.size() < majority) {
      continue;
    }
    std::vector<std::int64_t> fences;
    for (const auto& other : held) {
      if (other.fence) {
        fences.push_back(*other.fence);
      }
    }
    LockRow row = std::move(held.front());
    row.held_on = held.size();
    row.fence = quorum_token(std::move(fences), servers.size());  // as status shows it
    for (auto& other : held) {
      if (other.waiting.size() > row.waiting.size()) {
        row.waiting = std::move(other.waiting);  // as the most waiters
      }
      row.waiters = std::max(row.waiters, other.waiters);
      row.shared_holders = std::max(row.shared_holders, other.shared_holders);
      row.slots_held = std::max(row.slots_held, other.slots_held);
      if (!row.holder && other.holder) {
        row.holder = std::move(other.holder);
      }
    }
    if (row.holder && row.holder->fence != 0) {
      row.fence = row.holder->fence;  // the holder's own record of it, as status shows it
    }
    rows.push_back(std::move(row));
  }
  sort_rows(rows);
  return rows;
}

class QuorumSpace final : public LockSpace {
 public:
  explicit QuorumSpace(std::vector<QuorumServer> servers) : m_servers(std::move(servers)) {}

  // The servers' clocks cannot be combined into one value: this host's decides.
  std::unique_ptr<Clock> clock(bool) override { return std::make_unique<LocalClock>(); }

  // Read against this host's clock, as the quorum's lock decisions are.
  LockList list(std::string_view pattern, bool with_expired) override {
    LockList list;
    list.servers = m_servers.size();
    list.now = util::whole_seconds(util::wall_now());
    list.rows = list_quorum_locks(m_servers, pattern, list.now, with_expired);
    return list;
  }

 protected:
  // The request would have to stand on a majority, and the holder look on
  // each server: not built yet.
  std::string replace_refusal() const override {
    return "not available with a quorum of servers yet (a request kept by a majority is left "
           "to build); use one server, or stop the holder and use -w";
  }

  std::string refusal(LockKind kind) const override {
    switch (kind) {
      case LockKind::exclusive:
        return {};
      case LockKind::shared:
        return "not available with a quorum of servers; use one server";
      case LockKind::slots:
        break;
    }
    return "not with several servers (a quorum): it keeps no waiters' queue for the "
           "slots to go to waiters in arrival order; use one Redis deployment";
  }

  std::unique_ptr<Lockable> make_lock(Clock& clock, std::string key, LockKind) override {
    return std::make_unique<QuorumLock>(m_servers, clock, std::move(key));
  }

 private:
  std::vector<QuorumServer> m_servers;
};

}  // namespace

std::unique_ptr<LockSpace> quorum_lock_space(std::vector<Place> places) {
  std::vector<QuorumServer> servers;
  for (Place& given : places) {
    auto place = std::make_shared<Place>(std::move(given));
    servers.push_back(
        {place->url.redacted, [place] { return store::make_store(place->url, place->options); }});
  }
  return std::make_unique<QuorumSpace>(std::move(servers));
}

}  // namespace nxlock::lock
