// run-locked --replace, the replacer's side: the request, the wait's bound, the withdrawal.
#include "cli/replace.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "cli/lock_words.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::cli {

namespace {

// Whole seconds, rounded up.
std::int64_t whole_seconds_up(double seconds) {
  const auto whole = static_cast<std::int64_t>(seconds);
  return static_cast<double>(whole) < seconds ? whole + 1 : whole;
}

}  // namespace

Replacer::Replacer(Context& ctx, CliLock& lock, RunLockedArgs& args)
    : m_ctx(ctx), m_lock(lock), m_args(args) {
  if (args.lock.shared || args.lock.slots > 0) {
    throw util::Error(util::ErrorKind::usage, "--replace",
                      std::string("cannot be used with ") +
                          (args.lock.shared ? "--shared" : "--slots") +
                          ": it replaces the one exclusive holder of KEY");
  }
  if (args.lock.nonblock) {
    throw util::Error(util::ErrorKind::usage, "--replace",
                      "cannot be used with -n: it waits for the holder to stop (bound it with -w)");
  }
  m_requests = ctx.locks().replace_requests(lock.clock(), lock.lock().key());
}

bool Replacer::ask() {
  const lock::Status status = m_lock.lock().status();
  if (status.state != lock::Status::State::held) {
    return true;  // nobody to ask: taken as any waiter takes it
  }
  const std::string what = "lock '" + util::escape(m_lock.lock().key()) + "'";
  const std::int64_t left = std::max<std::int64_t>(0, status.expires_at - status.now_seconds);
  // Without -w: the holder's time left, then its stop (its renewals go on
  // until its job is gone): our ttl and --kill-after stand for its own.
  if (m_args.lock.wait < 0) {
    m_args.lock.wait =
        static_cast<double>(left + m_args.lock.ttl) + std::max(m_args.kill_after, 1.0);
  }
  const auto& holder = status.holder;
  if (!holder || !holder->replaceable || holder->finished_at != 0) {
    std::string who = holder ? holder_text(*holder) : "a holder that left no details";
    const std::string why =
        holder && holder->finished_at != 0
            ? "its job has ended and --hold keeps the lock"
            : "it is not a run-locked that renews (a `lock`, --no-renew, a page client or an "
              "older nxlock)";
    // A note, as a busy lock's: -q (cron) keeps it out of the mail.
    const auto bound = util::Micros(static_cast<std::int64_t>(m_args.lock.wait * 1e6));
    m_ctx.out.note(what + ": --replace cannot ask its holder (" + who + ") to stop: " + why +
                   "; waiting for it (up to " + util::seconds_text(bound) + ")");
    m_ctx.out.field("replace_asked", false);
    return true;
  }
  // The request stands as long as we may wait, and a second more.
  auto mine = m_requests->make(whole_seconds_up(m_args.lock.wait) + 1);
  if (const auto other = m_requests->post(mine)) {
    m_ctx.out.note(what + ": busy, another run-locked --replace (" + other->who() +
                   ") is replacing its holder first");
    m_ctx.out.bytes_field("key", m_lock.lock().key());
    m_ctx.out.field("acquired", false);
    m_ctx.out.field("replacing", nlohmann::json{{"pid", other->pid}, {"host", other->host}});
    return false;
  }
  m_posted = mine;
  m_ctx.out.note(what + ": asked its holder (" + holder_text(*holder) +
                 ") to stop its job (--replace); waiting for the lock");
  m_ctx.out.field("replace_asked", true);
  return true;
}

void Replacer::withdraw() noexcept {
  if (m_posted) {
    m_requests->withdraw(*m_posted);
    m_posted.reset();
  }
}

}  // namespace nxlock::cli
