// --slots N from a shell: every slot's state (status --slots), and who holds them when busy.
#include "cli/slots_report.hpp"

#include <algorithm>
#include <memory>

#include "cli/exit_status.hpp"
#include "cli/lock_words.hpp"
#include "lock/lease_lock.hpp"
#include "util/escape.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

namespace {

// A busy message names this many slots at most, those that free first.
constexpr std::size_t k_slots_named = 3;

// "slot 2 until 10:42:07 by pid 123 on db1 (dump)".
std::string slot_text(int slot, const lock::Status& status) {
  std::string text =
      "slot " + std::to_string(slot) + " until " + util::format_local_time(status.expires_at);
  if (status.holder) {
    text += " by " + holder_text(*status.holder);
  }
  return text;
}

nlohmann::json slot_json(int slot, const lock::Status& status) {
  static constexpr const char* k_states[] = {"free", "expired", "held"};
  nlohmann::json j = {{"slot", slot},
                      {"state", k_states[static_cast<int>(status.state)]},
                      {"held", status.state == lock::Status::State::held},
                      {"fence", status.fence ? nlohmann::json(*status.fence) : nlohmann::json()}};
  if (status.state == lock::Status::State::free) {
    return j;
  }
  j["value"] = lock::slot_value(slot, status.value);
  j["expires_at"] = status.expires_at;
  if (status.state == lock::Status::State::held) {
    j["seconds_left"] = status.expires_at - status.now_seconds;
    if (status.holder) {
      j["holder"] = holder_json(*status.holder);
    }
  }
  return j;
}

// One slot's lines of `status --slots`.
void say_slot(Context& ctx, const lock::SlotLock& semaphore, int slot,
              const lock::Status& status) {
  const std::string name = "slot " + std::to_string(slot) + ": ";
  const std::string fence_text =
      status.fence ? ", fence " + std::to_string(*status.fence) : std::string();
  switch (status.state) {
    case lock::Status::State::free:
      ctx.out.line(name + "free");
      return;
    case lock::Status::State::expired:
      ctx.out.line(name + "expired " + util::format_local_time(status.expires_at) + " (" +
                   describe_distance(status.now_seconds, status.expires_at) + "), value " +
                   lock::slot_value(slot, status.value) + fence_text);
      return;
    case lock::Status::State::held:
      break;
  }
  const std::int64_t left = status.expires_at - status.now_seconds;
  ctx.out.line(name + "held until " + util::format_local_time(status.expires_at) + " (" +
               std::to_string(left) + "s left), value " + lock::slot_value(slot, status.value) +
               fence_text);
  if (!status.holder) {
    return;
  }
  ctx.out.line("  holder: " + holder_text(*status.holder) + ", since " +
               util::format_local_time(status.holder->acquired_at));
  if (status.holder->finished_at != 0) {
    ctx.out.line("  finished " + util::format_local_time(status.holder->finished_at) +
                 ", holding the slot until " + util::format_local_time(status.expires_at) +
                 " (--hold)");
  } else if (status.holder->gone()) {
    // Anyone may release a slot by its value while it is held.
    ctx.out.line(
        "  the holder is gone: the slot stays held until it expires, or until `nxlock "
        "unlock " +
        util::escape(semaphore.key()) + " " + lock::slot_value(slot, status.value) + "`");
  }
}

}  // namespace

bool say_slots_busy(Context& ctx, lock::SlotLock& semaphore, const LockArgs& args) {
  const lock::Status whole = semaphore.status();
  const auto statuses = semaphore.statuses(whole);
  std::vector<int> held;  // slot numbers, the first to free first
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].state == lock::Status::State::held) {
      held.push_back(static_cast<int>(i) + 1);
    }
  }
  std::sort(held.begin(), held.end(), [&](int a, int b) {
    return statuses[static_cast<std::size_t>(a - 1)].expires_at <
           statuses[static_cast<std::size_t>(b - 1)].expires_at;
  });
  const auto status_of = [&](int slot) -> const lock::Status& {
    return statuses[static_cast<std::size_t>(slot - 1)];
  };
  // Held by another kind (its slots none of ours): an exclusive holder, or
  // shared ones, as the lock's own busy report names them.
  const bool other_kind =
      whole.state == lock::Status::State::held &&
      (whole.shared.empty() || std::string_view(lock::lease_kind(whole.shared)) != "slots");
  if (held.empty() && other_kind) {
    return false;
  }
  std::string message = "lock '" + util::escape(semaphore.key()) + "': busy, ";
  // A slot free this instant, but a queued waiter goes first: it is taking
  // it, or it died and its place lapses with its lease.
  const bool queued_ahead = held.size() < statuses.size();
  if (queued_ahead) {
    message += "a slot is free, but another waiter is first in line to take it";
  } else {
    message += "all " + std::to_string(statuses.size()) + " slots held: ";
    for (std::size_t i = 0; i < held.size() && i < k_slots_named; ++i) {
      message += (i == 0 ? "" : "; ") + slot_text(held[i], status_of(held[i]));
    }
    if (held.size() > k_slots_named) {
      message += "; and " + std::to_string(held.size() - k_slots_named) + " more";
    }
  }
  ctx.out.note(message + (args.nonblock ? "" : " (gave up waiting)"));
  ctx.out.bytes_field("key", semaphore.key());
  ctx.out.field("acquired", false);
  ctx.out.field("slots_held", held.size());
  if (queued_ahead) {
    ctx.out.field("queued_ahead", true);
  } else {
    ctx.out.field("kind", "slots");
    const lock::Status& first = status_of(held.front());
    ctx.out.field("held_until", first.expires_at);
    ctx.out.field("seconds_left", first.expires_at - first.now_seconds);
  }
  return true;
}

int slots_status(Context& ctx, lock::SlotLock& semaphore) {
  const auto statuses = semaphore.statuses();
  const auto held = static_cast<std::size_t>(
      std::count_if(statuses.begin(), statuses.end(),
                    [](const lock::Status& s) { return s.state == lock::Status::State::held; }));
  const bool all_held = held == statuses.size();
  ctx.out.bytes_field("key", semaphore.key());
  ctx.out.field("now", statuses.front().now_seconds);
  ctx.out.line(std::to_string(held) + " of " + std::to_string(statuses.size()) + " slots held");
  nlohmann::json slots = nlohmann::json::array();
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    const int slot = static_cast<int>(i) + 1;
    say_slot(ctx, semaphore, slot, statuses[i]);
    slots.push_back(slot_json(slot, statuses[i]));
  }
  ctx.out.field("slots", slots);
  ctx.out.field("slots_held", held);
  // Held as a plain lock is: the next taker would have to wait.
  ctx.out.field("held", all_held);
  return all_held ? k_exit_ok : k_exit_no;
}

}  // namespace nxlock::cli
