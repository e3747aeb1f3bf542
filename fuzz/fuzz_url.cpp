// libFuzzer target: the backend URL parser and the redactor that names URLs in messages.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "store/url.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string redacted = nxlock::store::redact_url(text);
  try {
    const nxlock::store::Url url = nxlock::store::parse_url(text);
    // A parsed TCP URL always has a host and a port a socket can take.
    if (url.scheme == nxlock::store::Url::Scheme::redis_tcp &&
        (url.host.empty() || url.port <= 0 || url.port > 65535)) {
      std::abort();
    }
    if (url.db < 0) {
      std::abort();
    }
  } catch (const nxlock::util::Error& error) {
    // Bad input is a usage error, never anything else.
    if (error.kind() != nxlock::util::ErrorKind::usage) {
      std::abort();
    }
  }
  return 0;
}
