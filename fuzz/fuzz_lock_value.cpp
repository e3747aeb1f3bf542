// libFuzzer target: the lock-value parsers (a stored value, and one a user typed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lock/lock.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = nxlock::store::parse_lock_timestamp(text);
  if (parsed) {
    // Only plain digits are a lock value, and never a negative one.
    if (*parsed < 0 || text.find_first_not_of("0123456789") != std::string_view::npos) {
      std::abort();
    }
  }
  // The first byte splits the input into a key and a value, for the user's parser.
  const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
  try {
    const std::int64_t value =
        nxlock::lock::parse_user_value(text.substr(0, split), text.substr(split));
    if (nxlock::store::parse_lock_timestamp(text.substr(split)) != value) {
      std::abort();
    }
  } catch (const nxlock::util::Error& error) {
    if (error.kind() != nxlock::util::ErrorKind::usage) {
      std::abort();
    }
  }
  return 0;
}
