// Cluster: hash slots of keys and the MOVED/ASK redirects of a Redis Cluster.
#pragma once

#include <optional>
#include <string_view>

#include <hiredis/hiredis.h>

#include "store/url.hpp"

namespace nxlock::store::redis {

constexpr int k_cluster_slots = 16384;

// The key's hash slot: CRC16 (XMODEM) of the key, or of its hash tag (the text
// between the first '{' and the next '}', if not empty), modulo 16384.
int key_slot(std::string_view key);

struct Redirect {
  bool ask = false;  // ASK: this command only, after ASKING; MOVED: the slot moved
  int slot = 0;
  HostPort address;  // host empty: the node that answered (it did not know its address)
};

// The redirect an error reply ("MOVED 3999 127.0.0.1:6381", "ASK …") asks for.
std::optional<Redirect> parse_redirect(const redisReply& reply);

}  // namespace nxlock::store::redis
