// POSIX file helpers for the embedded store: whole reads and writes, no-follow opens,
// and system-call failures turned into util::Error with the store's exit classes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"
#include "util/fd.hpp"

namespace nxlock::store::posix {

// The outcome class of a failed system call, as the user should see it.
util::ErrorKind kind_of(int err);

// `err` in words, for a message.
std::string reason(int err);

// Throws util::Error for `err` from `action` on `path`.
[[noreturn]] void fail(int err, const std::string& path, const std::string& action);

// Reads to the end of the file, or up to `size` bytes when the size is known: our
// files are never changed in place (they are replaced by rename), so stopping
// there saves the read() that would only report the end.
std::string read_all(int fd, const std::string& path, std::size_t size = SIZE_MAX);

void write_all(int fd, std::string_view bytes, const std::string& path);

void sync_fd(int fd, const std::string& path);

// Closes a file we wrote, reporting a late write error (NFS reports them here).
void close_written(util::UniqueFd fd, const std::string& path);

// Opens directory `name` in `parent` without following a symlink. When it is
// missing: returns an invalid fd, or with `create` makes it with exactly `mode`
// (and with `durable` syncs `parent`).
util::UniqueFd open_subdir(int parent, const char* name, const std::string& path, bool create,
                           mode_t mode, bool durable);

// The names in directory `dir` (an fd of it, which stays open) that are
// `length` lowercase hex digits: the stripes (2) and buckets (16) of the store.
// Empty if it cannot be read (it may be gone).
std::vector<std::string> hex_names(int dir, std::size_t length);

// Creates `name` in `dir` for writing, with exactly `mode`. O_EXCL: never writes
// through a file (or a link to one) that is already there; a stale one left by a
// writer that died is removed first (the caller's lock makes it stale).
util::UniqueFd create_exclusive(int dir, const std::string& name, const std::string& path,
                                mode_t mode);

}  // namespace nxlock::store::posix
