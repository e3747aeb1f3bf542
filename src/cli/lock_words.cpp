// How a lock's state is said: holder records, verdicts, distances (lock_words.hpp).
#include "cli/lock_words.hpp"

#include <string>
#include <string_view>

#include "lock/lease_lock.hpp"
#include "util/escape.hpp"
#include "util/redact.hpp"

namespace nxlock::cli {

using lock::Verdict;

// What a user can do about a lock whose holder is gone (Holder::gone).
std::string gone_advice(std::string_view key) {
  return "the lock stays held until it expires, or until `nxlock unlock --force " +
         util::escape(key) + "`";
}

namespace {

struct VerdictWords {
  const char* token;   // --json
  const char* reason;  // stderr
};

VerdictWords words_for(Verdict verdict) {
  switch (verdict) {
    case Verdict::done:
      return {"done", "done"};
    case Verdict::expired:
      return {"expired", "expired"};
    case Verdict::taken_over:
      return {"taken_over", "taken over by another value"};
    case Verdict::absent:
      return {"absent", "no such lock"};
    case Verdict::held_by_other:
      return {"held_by_other", "held by another value"};
  }
  return {"unknown", "unknown"};
}

}  // namespace

// Records written by other clients (or older versions) may hold a password in
// their command: never show one.
nlohmann::json holder_json(const lock::Holder& holder) {
  nlohmann::json j = {{"host", holder.host},
                      {"pid", holder.pid},
                      {"command", util::redact_secrets(holder.command)},
                      {"acquired_at", holder.acquired_at}};
  if (holder.finished_at != 0) {
    j["finished_at"] = holder.finished_at;
  }
  if (holder.gone() || holder.releasing()) {
    j["running"] = false;
  }
  if (holder.releasing()) {
    j["releasing"] = true;  // its watchdog releases the lock once the job is gone
  }
  return j;
}

std::string holder_text(const lock::Holder& holder, bool say_gone) {
  std::string text = "pid " + std::to_string(holder.pid) + " on " + util::escape(holder.host);
  if (!holder.command.empty()) {
    text += " (" + util::escape(util::redact_secrets(holder.command)) + ")";
  }
  if (say_gone && holder.gone()) {
    text += ", no longer running";
  } else if (holder.releasing()) {
    text += ", no longer running; its watchdog releases the lock once the job has stopped";
  }
  return text;
}

const char* verdict_reason(Verdict verdict) {
  return words_for(verdict).reason;
}
const char* verdict_token(Verdict verdict) {
  return words_for(verdict).token;
}

std::string describe_distance(std::int64_t from, std::int64_t to) {
  const std::int64_t delta = to - from;
  return delta >= 0 ? "in " + std::to_string(delta) + "s" : std::to_string(-delta) + "s ago";
}

std::string busy_shared_holders(Context& ctx, lock::Lockable& lock) {
  constexpr std::size_t k_named = 3;
  const lock::Status status = lock.status();
  if (status.shared.empty()) {
    return {};
  }
  const bool slots = std::string_view(lock::lease_kind(status.shared)) == "slots";
  std::string text = " by " + std::to_string(status.shared.size()) +
                     (slots ? " slot holder" : " shared holder") +
                     (status.shared.size() == 1 ? "" : "s");
  nlohmann::json shared = nlohmann::json::array();
  for (std::size_t i = 0; i < status.shared.size(); ++i) {
    const lock::SharedHolderView view = lock::view_shared_holder(status.shared[i]);
    if (i < k_named) {
      text += (i == 0 ? ": " : ", ") + (view.holder ? holder_text(*view.holder) : view.value);
    }
    shared.push_back({{"value", view.value},
                      {"expires_at", view.expires_at},
                      {"holder", view.holder ? holder_json(*view.holder) : nlohmann::json()}});
  }
  if (status.shared.size() > k_named) {
    text += " and " + std::to_string(status.shared.size() - k_named) + " more";
  }
  ctx.out.field("kind", lock::lease_kind(status.shared));
  ctx.out.field("shared", std::move(shared));
  return text;
}

}  // namespace nxlock::cli
