// list: the locks held now, one row each (a table, or --json), from a store or a quorum.
#include <algorithm>
#include <string>
#include <vector>

#include "cli/command_args.hpp"
#include "cli/exit_status.hpp"
#include "cli/lock_words.hpp"
#include "lock/lease_lock.hpp"
#include "lock/lock_space.hpp"
#include "util/escape.hpp"
#include "util/redact.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

namespace {

// What the holder record says of a row: "hold" when the job of run-locked
// --hold finished and the lock stays until its expiry, "gone" when the holder
// process is known to be gone (Holder::gone), else "held"; "expired" first,
// then "shared" when --shared holders hold it, "slots" when slot holders do
// (--slots). A record does not say whether `lock` or run-locked took the lock.
const char* state_of(const lock::LockRow& row) {
  if (row.expired) {
    return "expired";
  }
  if (row.shared_holders > 0) {
    return "shared";
  }
  if (row.slots_held > 0) {
    return "slots";
  }
  if (row.holder && row.holder->finished_at != 0) {
    return "hold";
  }
  if (row.holder && row.holder->gone()) {
    return "gone";
  }
  return "held";
}

nlohmann::json row_json(const lock::LockRow& row, const char* state, std::int64_t now,
                        std::size_t servers) {
  nlohmann::json j = nlohmann::json::object();
  Output::bytes_into(j, "key", row.key);
  if (row.slot) {
    j["slot"] = *row.slot;
    j["slots_held"] = row.slots_held;
  }
  j["value"] = row.value;
  j["state"] = state;
  j["expires_at"] = row.expires_at;
  if (!row.expired) {
    j["seconds_left"] = row.expires_at - now;  // whole seconds that surely remain (as status)
  }
  j["acquired_at"] = row.holder ? nlohmann::json(row.holder->acquired_at) : nlohmann::json();
  j["fence"] = row.fence ? nlohmann::json(*row.fence) : nlohmann::json();
  j["waiters"] = row.waiters ? nlohmann::json(*row.waiters) : nlohmann::json();
  j["shared_holders"] = row.shared_holders;
  j["hold"] = row.holder && row.holder->finished_at != 0;
  j["holder"] = row.holder ? holder_json(*row.holder) : nlohmann::json();
  if (servers > 1) {
    j["servers_holding"] = row.held_on;
  }
  return j;
}

// A lock's waiters for --json (list --waiters): what each ticket tells, null
// where a waiter of an older nxlock tells nothing.
nlohmann::json waiters_json(const lock::LockRow& row) {
  nlohmann::json waiting = nlohmann::json::array();
  for (const auto& waiter : row.waiting) {
    const auto& d = waiter.details;
    waiting.push_back({{"pid", d ? nlohmann::json(d->pid) : nlohmann::json()},
                       {"host", d ? nlohmann::json(d->host) : nlohmann::json()},
                       {"since", d ? nlohmann::json(d->since) : nlohmann::json()},
                       {"kind", d ? nlohmann::json(lock::waiter_kind_name(d->kind)) : nlohmann::json()}});
  }
  return waiting;
}

// "  waiter 1: pid 4242 on db1, exclusive, waiting since 07:40:01 UTC (12s)":
// one line per waiter under its lock's rows (list --waiters).
std::vector<std::string> waiter_lines(const lock::LockRow& row, std::int64_t now) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < row.waiting.size(); ++i) {
    const auto& d = row.waiting[i].details;
    std::string line = "  waiter " + std::to_string(i + 1) + ": ";
    if (d) {
      line += "pid " + std::to_string(d->pid) + " on " + util::escape(d->host) + ", " +
              lock::waiter_kind_name(d->kind) + ", waiting since " +
              util::format_local_time(d->since) + " (" +
              std::to_string(std::max<std::int64_t>(0, now - d->since)) + "s)";
    } else if (row.waiting[i].ticket.empty()) {
      line += "a waiter that told nothing of itself (etcdctl lock, or an older nxlock)";
    } else {
      line += "a waiter of an older nxlock (its ticket tells nothing more)";
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// Columns padded to their widest cell, the last one not: a table a person
// reads, one lock a line (--json is for scripts).
std::string table(const std::vector<std::vector<std::string>>& cells) {
  std::vector<std::size_t> widths(cells.front().size(), 0);
  for (const auto& row : cells) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string text;
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line.append(widths[i] - row[i].size() + 2, ' ');
      }
    }
    line.erase(line.find_last_not_of(' ') + 1);
    text += (text.empty() ? "" : "\n") + line;
  }
  return text;
}

// "12s ago": how long the holder has held the lock. A holder's clock may be a
// little ahead of the backend's: never "in 1s".
std::string since_text(const lock::Holder& holder, std::int64_t now) {
  return std::to_string(std::max<std::int64_t>(0, now - holder.acquired_at)) + "s ago";
}

// The optional columns, each shown when some row has something to say in it.
struct Columns {
  bool slots = false;   // SLOT: some row is a slot of a --slots lock
  bool shared = false;  // SHARED: some lock is held by --shared holders
};

std::vector<std::string> row_cells(const lock::LockRow& row, const char* state, std::int64_t now,
                                   const Columns& columns, std::size_t servers) {
  std::vector<std::string> cells{util::escape(row.key)};
  if (columns.slots) {
    cells.push_back(row.slot ? std::to_string(*row.slot) : "-");
  }
  const auto& holder = row.holder;
  cells.push_back(
      holder ? "pid " + std::to_string(holder->pid) + " on " + util::escape(holder->host) : "-");
  cells.push_back(holder ? since_text(*holder, now) : "-");
  cells.push_back(describe_distance(now, row.expires_at));
  cells.push_back(row.fence ? std::to_string(*row.fence) : "-");
  cells.push_back(row.waiters ? std::to_string(*row.waiters) : "-");
  if (columns.shared) {
    cells.push_back(row.shared_holders > 0 ? std::to_string(row.shared_holders) : "-");
  }
  cells.push_back(state);
  if (servers > 1) {
    cells.push_back(std::to_string(row.held_on) + "/" + std::to_string(servers));
  }
  cells.push_back(holder ? util::escape(util::redact_secrets(holder->command)) : "");
  return cells;
}

std::vector<std::string> header(const Columns& columns, std::size_t servers) {
  std::vector<std::string> titles{"KEY"};
  if (columns.slots) {
    titles.emplace_back("SLOT");
  }
  for (const char* title : {"HOLDER", "SINCE", "UNTIL", "FENCE", "WAITERS"}) {
    titles.emplace_back(title);
  }
  if (columns.shared) {
    titles.emplace_back("SHARED");
  }
  titles.emplace_back("STATE");
  if (servers > 1) {
    titles.emplace_back("SERVERS");
  }
  titles.emplace_back("COMMAND");
  return titles;
}

int run_list(Context& ctx, const ListArgs& args) {
  const std::string pattern = lock::prefixed_pattern(ctx.globals.prefix, args.pattern);
  lock::LockList listed = ctx.locks().list(pattern, args.expired);
  const std::vector<lock::LockRow>& rows = listed.rows;
  const std::int64_t now = listed.now;
  const std::size_t servers = listed.servers;
  ctx.out.field("now", now);
  if (ctx.out.json) {
    nlohmann::json locks = nlohmann::json::array();
    for (const auto& row : rows) {
      locks.push_back(row_json(row, state_of(row), now, servers));
      if (args.waiters) {
        locks.back()["waiting"] = waiters_json(row);
      }
    }
    ctx.out.field("locks", std::move(locks));
  } else if (!rows.empty()) {
    Columns columns;
    for (const auto& row : rows) {
      columns.slots = columns.slots || row.slot;
      columns.shared = columns.shared || row.shared_holders > 0;
    }
    std::vector<std::vector<std::string>> cells{header(columns, servers)};
    for (const auto& row : rows) {
      cells.push_back(row_cells(row, state_of(row), now, columns, servers));
    }
    if (!args.waiters) {
      ctx.out.line(table(cells));
      return k_exit_ok;
    }
    // Each lock's waiters under its last row (a lock of slots or shared
    // holders has several): cells never hold a newline (util::escape).
    const std::string text = table(cells);
    std::size_t at = text.find('\n') + 1;
    std::string out = text.substr(0, at);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::size_t end = text.find('\n', at);
      out += text.substr(at, end == std::string::npos ? std::string::npos : end - at + 1);
      at = end == std::string::npos ? text.size() : end + 1;
      const bool last_of_key = i + 1 == rows.size() || rows[i + 1].key != rows[i].key;
      if (last_of_key) {
        for (const auto& line : waiter_lines(rows[i], now)) {
          out += (out.ends_with('\n') ? "" : "\n") + line + "\n";
        }
      }
    }
    while (out.ends_with('\n')) {
      out.pop_back();
    }
    ctx.out.line(out);
  }
  return k_exit_ok;
}

}  // namespace

Runner list_runner(std::shared_ptr<ListArgs> args) {
  return [args](Context& ctx) { return run_list(ctx, *args); };
}

}  // namespace nxlock::cli
