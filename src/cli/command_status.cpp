// status: a lock's state, its kind and holders, and a quorum's servers, from a shell.
#include "cli/command_args.hpp"
#include "cli/exit_status.hpp"
#include "cli/lock_words.hpp"
#include "cli/slots_report.hpp"
#include "lock/lease_lock.hpp"
#include "util/escape.hpp"
#include "util/time.hpp"

namespace nxlock::cli {

namespace {

// A quorum's status: which servers hold what (--json), and how many hold the
// majority's value (text).
void add_server_views(Context& ctx, const std::vector<lock::ServerView>& views,
                      const lock::Status& status) {
  if (views.empty()) {
    return;
  }
  nlohmann::json servers = nlohmann::json::array();
  std::size_t holding = 0;
  for (const auto& view : views) {
    static constexpr const char* k_states[] = {"free", "expired", "held", "unavailable",
                                                   "foreign"};
    nlohmann::json j = {{"url", view.server}, {"state", k_states[static_cast<int>(view.state)]}};
    if (!view.value.empty()) {
      j["value"] = view.value;
    }
    if (!view.error.empty()) {
      j["error"] = view.error;
    }
    const bool holds = view.state == lock::ServerView::State::held && view.value == status.value;
    j["holds"] = holds;
    holding += holds ? 1 : 0;
    servers.push_back(std::move(j));
  }
  ctx.out.field("servers", servers);
  if (status.state == lock::Status::State::held) {
    ctx.out.line("quorum: held on " + std::to_string(holding) + " of " +
                 std::to_string(views.size()) + " servers");
  }
}

// Each shared holder of a held lock: one line, and the "shared" array of --json.
void show_shared_holders(Context& ctx, const lock::Status& status) {
  if (status.shared.empty()) {
    return;
  }
  nlohmann::json shared = nlohmann::json::array();
  for (const auto& lease : status.shared) {
    const lock::SharedHolderView view = lock::view_shared_holder(lease);
    std::string line = (view.slot > 0 ? "slot " + std::to_string(view.slot) + " holder: "
                                      : std::string("shared holder: ")) +
                       (view.holder ? holder_text(*view.holder) : "-");
    if (view.holder) {
      line += ", since " + util::format_local_time(view.holder->acquired_at);
    }
    line += ", until " + util::format_local_time(view.expires_at);
    if (view.fence) {
      line += ", fence " + std::to_string(*view.fence);
    }
    ctx.out.line(line + ", value " + view.value);
    shared.push_back({{"value", view.value},
                      {"slot", view.slot > 0 ? nlohmann::json(view.slot) : nlohmann::json()},
                      {"expires_at", view.expires_at},
                      {"fence", view.fence ? nlohmann::json(*view.fence) : nlohmann::json()},
                      {"holder", view.holder ? holder_json(*view.holder) : nlohmann::json()}});
  }
  ctx.out.field("shared", std::move(shared));
}

}  // namespace

Runner status_runner(std::shared_ptr<StatusArgs> args) {
  return [args](Context& ctx) {
    auto clock = ctx.locks().clock(args->clock == "local");
    if (args->slots > 0) {
      return slots_status(ctx, *ctx.locks().slots(*clock, ctx.key(args->key), args->slots));
    }
    const auto lock_ptr = ctx.locks().lock(*clock, ctx.key(args->key), lock::LockKind::exclusive);
    lock::Lockable& lock = *lock_ptr;
    const auto status = lock.status();
    ctx.out.bytes_field("key", lock.key());
    ctx.out.field("now", status.now_seconds);
    // The latest token issued, in every state (a counter nothing has moved: null).
    ctx.out.field("fence", status.fence ? nlohmann::json(*status.fence) : nlohmann::json());
    const std::string fence_text =
        status.fence ? ", fence " + std::to_string(*status.fence) : std::string();
    add_server_views(ctx, status.servers, status);
    switch (status.state) {
      case lock::Status::State::free:
        ctx.out.line("free");
        ctx.out.field("state", "free");
        ctx.out.field("held", false);
        if (status.held_under) {
          ctx.out.line("but lock '" + util::escape(*status.held_under) +
                       "' under it is held, and a taker of this one waits for it (etcd's "
                       "prefix rule)");
          ctx.out.bytes_field("held_under", *status.held_under);
        }
        return k_exit_no;
      case lock::Status::State::expired:
        ctx.out.line("expired " + util::format_local_time(status.expires_at) + " (" +
                     describe_distance(status.now_seconds, status.expires_at) + "), value " +
                     status.value + fence_text);
        ctx.out.field("state", "expired");
        ctx.out.field("held", false);
        ctx.out.field("value", status.value);
        ctx.out.field("expires_at", status.expires_at);
        return k_exit_no;
      case lock::Status::State::held:
        break;
    }
    // The whole seconds that surely remain: held through the value's second,
    // the lock has up to one more (and the value, now + ttl + 1, one more than its ttl).
    const std::int64_t left = status.expires_at - status.now_seconds;
    // On etcd (a granted TTL), a holder with no token is another client's
    // (`etcdctl lock`), which tells its token to its command alone.
    const std::string held_fence_text =
        status.fence || !status.granted_ttl ? fence_text : ", fence unknown";
    ctx.out.line("held until " + util::format_local_time(status.expires_at) + " (" +
                 std::to_string(left) + "s left), value " + status.value + held_fence_text);
    if (status.granted_ttl) {
      ctx.out.line("lease granted for " + std::to_string(*status.granted_ttl) + "s");
      ctx.out.field("granted_ttl", *status.granted_ttl);
    }
    const char* kind = status.shared.empty() ? "exclusive" : lock::lease_kind(status.shared);
    if (status.shared_holders > 0) {
      ctx.out.line(std::string(kind == std::string_view("slots") ? "held as slots by "
                                                                 : "shared by ") +
                   std::to_string(status.shared_holders) + " holder" +
                   (status.shared_holders == 1 ? "" : "s"));
    }
    ctx.out.field("kind", kind);
    ctx.out.field("shared_holders", status.shared_holders);
    show_shared_holders(ctx, status);
    if (status.holder) {
      ctx.out.line("holder: " + holder_text(*status.holder) + ", since " +
                   util::format_local_time(status.holder->acquired_at));
      ctx.out.field("holder", holder_json(*status.holder));
      if (status.holder->finished_at == 0 && status.holder->gone()) {
        ctx.out.line("the holder is gone: " + gone_advice(args->key));
      }
      if (status.holder->finished_at != 0) {
        // run-locked --hold: the job is over, but the lock stays until its expiry.
        ctx.out.line("finished " + util::format_local_time(status.holder->finished_at) +
                     ", holding the lock until " + util::format_local_time(status.expires_at) +
                     " (--hold)");
        ctx.out.field("hold_until", status.expires_at);
      }
    }
    ctx.out.field("state", "held");
    ctx.out.field("held", true);
    ctx.out.field("value", status.value);
    ctx.out.field("expires_at", status.expires_at);
    ctx.out.field("seconds_left", left);
    return k_exit_ok;
  };
}

}  // namespace nxlock::cli
