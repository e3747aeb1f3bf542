// The keys nxlock keeps beside a lock (holder details, fencing counter), and how they are named.
#pragma once

#include <string>
#include <string_view>

namespace nxlock::lock {

// The key named `suffix` beside the lock `key`, in the lock key's Redis Cluster
// hash slot: a key with a hash tag (a '{' followed later by a '}' with something
// between, as the Cluster specification says) keeps it, and gets ":suffix"
// ("{jobs}.backup" → "{jobs}.backup:holder"); any other key becomes the tag
// ("backup" → "{backup}:holder"). The same on every backend.
//
// A key that holds a '}' but no valid tag ("a}b") cannot be given a companion in
// its slot: the wrapped name's tag ends at its first '}'. Only a cluster minds;
// it refuses the fenced scripts with CROSSSLOT, which the Redis backend reports.
std::string companion_key(std::string_view key, std::string_view suffix);

// The fencing counter of `key`: companion_key(key, "fence").
std::string fence_key(std::string_view key);

// The waiters' queue of `key`: companion_key(key, "queue").
std::string queue_key(std::string_view key);

}  // namespace nxlock::lock
