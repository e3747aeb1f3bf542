// libFuzzer target: bytes as an etcd member (or anything on its port) could send them, read by
// nxlock's HTTP/1.1 response reader (what answered: its status line and Server header), fed in
// two pieces, then the gateway's JSON fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "store/etcd/etcd_json.hpp"
#include "store/net/http_reader.hpp"
#include "util/error.hpp"

namespace {

using nxlock::store::net::HttpReader;

void check_one_line(const std::string& text) {
  if (text.find_first_of("\r\n") != std::string::npos) {
    std::abort();
  }
}

// The reader's verdict on `bytes`, fed whole.
std::string read_whole(std::string_view bytes, bool& complete, bool& failed) {
  HttpReader reader;
  reader.feed(bytes);
  reader.end_of_stream();
  complete = reader.complete();
  failed = reader.failed();
  if (failed) {
    check_one_line(reader.error());
  }
  if (complete && (reader.status() < 100 || reader.status() > 599)) {
    std::abort();
  }
  // What answered, quoted in messages: the status line as it came, and the
  // Server header, each cut to k_quoted bytes.
  const std::string& line = reader.status_line();
  if ((complete && line.empty()) ||
      (!line.empty() && (!line.starts_with("HTTP/1.") || line.size() > HttpReader::k_quoted ||
                         line.find("\r\n") != std::string::npos)) ||
      reader.server().size() > HttpReader::k_quoted) {
    std::abort();
  }
  return reader.body();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  bool complete = false;
  bool failed = false;
  const std::string whole = read_whole(bytes, complete, failed);

  // The same bytes in two pieces, split anywhere, as a socket may hand them over,
  // with the body taken as it comes (a stream): the same outcome and body.
  const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
  HttpReader reader;
  std::string body;
  reader.feed(bytes.substr(0, split));
  body += reader.take_body();
  reader.feed(bytes.substr(split));
  reader.end_of_stream();
  body += reader.take_body();
  if (reader.complete() != complete || reader.failed() != failed || (!failed && body != whole)) {
    std::abort();
  }
  if (body.size() > HttpReader::k_max_body) {
    std::abort();
  }

  // The body as the gateway's JSON: its fields read, or "unexpected answer" (70).
  const nlohmann::json answer = nlohmann::json::parse(body, nullptr, false);
  if (!answer.is_discarded()) {
    for (const char* name : {"revision", "TTL", "ID", "create_revision"}) {
      try {
        (void)nxlock::store::etcd::int_field(answer, name, "k");
        (void)nxlock::store::etcd::bytes_field(answer, name, "k");
      } catch (const nxlock::util::Error& error) {
        if (error.kind() != nxlock::util::ErrorKind::internal) {
          std::abort();
        }
        check_one_line(error.what());
      }
    }
  }
  // base64 round trip, exact to the byte.
  if (nxlock::store::etcd::base64_decode(nxlock::store::etcd::base64_encode(bytes)) != bytes) {
    std::abort();
  }
  return 0;
}
