// locked_rewrite: a small file read, changed and replaced whole under a lock, so
// that concurrent writers lose no update and readers never see half a file.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace nxlock::util {

// What the file held (nullopt: absent) → what it is to hold.
using Rewrite = std::function<std::string(const std::optional<std::string>&)>;

// Replaces `dir`/`name` with rewrite(its content), holding an exclusive flock
// of `dir`/`lock_name` (created if absent, never removed: removing it would let
// two writers lock two different files) from the read to the rename. The new
// content goes to a temporary file beside it (a name no "*.<ext>" glob of
// `name` matches), fsynced, renamed over `name`, and the directory fsynced:
// a reader sees the old file or the new one, never a torn one. Throws
// util::Error (permission or internal) naming the path that failed.
void locked_rewrite(const std::string& dir, const std::string& name, const std::string& lock_name,
                    const Rewrite& rewrite);

}  // namespace nxlock::util
