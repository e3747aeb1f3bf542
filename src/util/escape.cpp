// escape: one-line rendering of arbitrary bytes (see escape.hpp).
#include "util/escape.hpp"

#include <algorithm>

namespace nxlock::util {

namespace {

// The length of the well-formed UTF-8 sequence at the start of `bytes` (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or 0 if there is none.
std::size_t utf8_sequence(std::string_view bytes) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = at(0);
  std::size_t length = 0;
  unsigned char low = 0x80;   // the range of the second byte, which rules out
  unsigned char high = 0xbf;  // overlong forms, surrogates and code points past U+10FFFF
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (bytes.size() < length || at(1) < low || at(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (at(i) < 0x80 || at(i) > 0xbf) {
      return 0;
    }
  }
  return length;
}

// Characters that are well-formed but would still break or hide a line.
bool is_control_character(std::string_view sequence) {
  return (sequence.size() == 2 && static_cast<unsigned char>(sequence[0]) == 0xc2 &&
          static_cast<unsigned char>(sequence[1]) < 0xa0) ||  // C1 controls, U+0080..U+009F
         sequence == "\u2028" ||
         sequence == "\u2029";
}

void append_hex(std::string& out, std::string_view bytes) {
  static constexpr char k_hex[] = "0123456789abcdef";
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += "\\x";
    out += k_hex[byte >> 4];
    out += k_hex[byte & 0xf];
  }
}

}  // namespace

std::string escape(std::string_view bytes, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(bytes.size(), max_bytes) + 2);
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    std::size_t length = byte < 0x80 ? 1 : utf8_sequence(bytes.substr(i));
    const bool escaped = length == 0 || byte < 0x20 || byte == 0x7f || byte == '\\' ||
                         is_control_character(bytes.substr(i, length));
    length = std::max<std::size_t>(length, 1);  // a malformed byte goes alone
    if (i + length > max_bytes) {
      break;
    }
    if (escaped) {
      append_hex(out, bytes.substr(i, length));
    } else {
      out.append(bytes.substr(i, length));
    }
    i += length;
  }
  if (i < bytes.size()) {
    out += "…";
  }
  return out;
}

}  // namespace nxlock::util
