// libFuzzer target: --ping's URL parser, {key}'s expansion, and the request built from them.
// Input: the lock's key, a newline, then the URL as given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "run/ping_url.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = input.find('\n');
  const std::string_view key = newline == std::string_view::npos ? "" : input.substr(0, newline);
  const std::string_view text =
      newline == std::string_view::npos ? input : input.substr(newline + 1);
  const std::string expanded = nxlock::run::expand_key(text, key);
  try {
    const nxlock::run::PingUrl url = nxlock::run::parse_ping_url(expanded);
    if (url.host.empty() || url.port < 1 || url.port > 65535) {
      std::abort();
    }
    // What may be shown names no path nor query: nothing after the host and port.
    const std::string shown = url.shown();
    if (shown.find('/', shown.find("://") + 3) != std::string::npos ||
        shown.find('?') != std::string::npos || shown.find('@') != std::string::npos) {
      std::abort();
    }
    // The request is one request line and headers: no byte of the URL splits it.
    for (const std::string_view suffix : {"/start", "", "/124"}) {
      const std::string request = nxlock::run::ping_request(url, suffix, "rid");
      const std::size_t first_end = request.find("\r\n");
      const std::string_view line = std::string_view(request).substr(0, first_end);
      if (!line.starts_with("GET /") || !line.ends_with(" HTTP/1.1") ||
          line.find_first_of(" ", 4) != line.size() - 9 ||
          request.find("\r\n\r\n") != request.size() - 4) {
        std::abort();
      }
    }
  } catch (const nxlock::util::Error& error) {
    // A URL is refused as a usage error, naming no more than its scheme and host.
    if (error.kind() != nxlock::util::ErrorKind::usage || error.subject() != "--ping") {
      std::abort();
    }
  }
  return 0;
}
