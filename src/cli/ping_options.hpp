// run-locked's --ping options, made into a Pinger (run/pinger.hpp).
#pragma once

#include <memory>

#include "cli/command_args.hpp"
#include "cli/context.hpp"
#include "run/pinger.hpp"

namespace nxlock::cli {

// The Pinger of --ping, --ping-file or NXLOCK_PING_URL ({key}: the KEY given),
// or nullptr when none is set. Reads --ping-file now. Throws util::Error
// (usage) for an unreadable file or a URL that is not http:// or https://,
// naming no more of the URL than its scheme and host: before the lock is
// taken, as any other bad option.
std::unique_ptr<run::Pinger> make_pinger(Context& ctx, const RunLockedArgs& args);

}  // namespace nxlock::cli
