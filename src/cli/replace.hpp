// run-locked --replace, the replacer's side: ask the holder to stop its job,
// bound the wait for the lock, and withdraw the request once that wait ends.
#pragma once

#include <memory>
#include <optional>

#include "cli/acquire.hpp"
#include "cli/command_args.hpp"
#include "cli/context.hpp"
#include "lock/replace_request.hpp"

namespace nxlock::cli {

class Replacer {
 public:
  // Throws usage (64) for --replace with --shared, --slots or -n, or where
  // the backend offers no requests (LockSpace::replace_requests()).
  Replacer(Context& ctx, CliLock& lock, RunLockedArgs& args);
  ~Replacer() { withdraw(); }
  Replacer(const Replacer&) = delete;
  Replacer& operator=(const Replacer&) = delete;

  // Before the wait: asks a holder that can be asked (posts the request), or
  // says on stderr that it is waited for; without -w, bounds the wait (see the
  // man page). False when another replacer's request stands: it is first,
  // and this run exits exit_status() (-E's, 75), as said on stderr.
  bool ask();
  int exit_status() const { return m_args.lock.conflict_exit; }

  // Takes the request away (the lock is ours, or the wait ended); idempotent.
  void withdraw() noexcept;

 private:
  Context& m_ctx;
  CliLock& m_lock;
  RunLockedArgs& m_args;
  std::unique_ptr<lock::ReplaceRequests> m_requests;
  std::optional<lock::ReplaceRequest> m_posted;
};

}  // namespace nxlock::cli
