// escape: arbitrary bytes (keys, values, paths) made safe for one line of a message or trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nxlock::util {

// Printable ASCII and well-formed UTF-8 stay as they are. Every other byte
// becomes \xNN (lowercase hex): C0 controls (newline included), DEL, the C1
// controls and the Unicode line and paragraph separators (as the bytes of their
// UTF-8 encoding), bytes that are not well-formed UTF-8, and the backslash
// itself, so that the text reads back unambiguously. Input beyond `max_bytes`
// is cut at a character boundary and "…" appended: by default at a length that
// keeps an error about a 100 kB key one readable line.
inline constexpr std::size_t k_message_bytes = 256;
std::string escape(std::string_view bytes, std::size_t max_bytes = k_message_bytes);

// A value quoted in a message (a lock value a user gave) is cut after this many bytes.
inline constexpr std::size_t k_quoted_bytes = 40;

}  // namespace nxlock::util
