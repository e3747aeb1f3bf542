// libFuzzer target: the lock-value parsers (a stored value, and one a user typed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lock/lease_lock.hpp"
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
  // A value's form names one kind of hold, and the parser of that kind takes it.
  const std::string_view value = text.substr(split);
  switch (nxlock::lock::value_form(value)) {
    case nxlock::lock::ValueForm::slot: {
      // A slot beyond the lock's count is the user's mistake: a usage error, never a crash.
      try {
        const auto slot = nxlock::lock::parse_slot_value("k", value, 1 << 30);
        if (slot.slot < 1 || !nxlock::store::parse_lock_timestamp(slot.value) ||
            nxlock::lock::slot_value(slot.slot, slot.value) != value) {
          std::abort();
        }
      } catch (const nxlock::util::Error& error) {
        if (error.kind() != nxlock::util::ErrorKind::usage) {
          std::abort();
        }
      }
      break;
    }
    case nxlock::lock::ValueForm::shared:
      if (!nxlock::lock::is_shared_value(value)) {
        std::abort();
      }
      break;
    case nxlock::lock::ValueForm::exclusive:
      if (!nxlock::store::parse_lock_timestamp(value)) {
        std::abort();
      }
      break;
    case nxlock::lock::ValueForm::other:
      if (nxlock::lock::is_shared_value(value) || nxlock::store::parse_lock_timestamp(value)) {
        std::abort();
      }
      break;
  }
  return 0;
}
