// Cluster: hash slots of keys (the MOVED/ASK redirects are parsed in reply.hpp).
#pragma once

#include <optional>
#include <string_view>

#include "store/redis/reply.hpp"

namespace nxlock::store::redis {

constexpr int k_cluster_slots = 16384;

// The key's hash slot: CRC16 (XMODEM) of the key, or of its hash tag (the text
// between the first '{' and the next '}', if not empty), modulo 16384.
int key_slot(std::string_view key);

}  // namespace nxlock::store::redis
