// Cluster: the key-to-slot function of the Cluster specification and redirect parsing.
#include "store/redis/cluster.hpp"

#include <charconv>
#include <cstdint>
#include <string>

namespace nxlock::store::redis {

namespace {

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (const char c : data) {
    crc = static_cast<std::uint16_t>(
        crc ^ (static_cast<std::uint16_t>(static_cast<unsigned char>(c)) << 8));
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

}  // namespace

int key_slot(std::string_view key) {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16(key) % k_cluster_slots;
}

std::optional<Redirect> parse_redirect(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ERROR) {
    return std::nullopt;
  }
  const std::string_view text(reply.str, reply.len);
  Redirect redirect;
  std::string_view rest;
  if (text.substr(0, 6) == "MOVED ") {
    rest = text.substr(6);
  } else if (text.substr(0, 4) == "ASK ") {
    redirect.ask = true;
    rest = text.substr(4);
  } else {
    return std::nullopt;
  }
  // "<slot> <host>:<port>"; the host may be an IPv6 address (the last ':' splits).
  const auto space = rest.find(' ');
  const auto colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  const auto slot_text = rest.substr(0, space);
  const auto port_text = rest.substr(colon + 1);
  if (std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), redirect.slot).ec !=
          std::errc() ||
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), redirect.address.port)
              .ec != std::errc()) {
    return std::nullopt;
  }
  redirect.address.host = std::string(rest.substr(space + 1, colon - space - 1));
  if (redirect.address.host.size() > 1 && redirect.address.host.front() == '[') {
    redirect.address.host = redirect.address.host.substr(1, redirect.address.host.size() - 2);
  }
  return redirect;
}

}  // namespace nxlock::store::redis
