// PingUrl: a dead man's switch's URL (healthchecks.io's protocol), parsed, its
// {key} filled in, and shown with its path (the credential) left out.
#pragma once

#include <string>
#include <string_view>

namespace nxlock::run {

struct PingUrl {
  bool tls = false;   // https
  std::string host;   // a name or an address (IPv6 without [])
  int port = 80;
  std::string path;   // from the first '/', without the query ("" for none)
  std::string query;  // after '?', without it ("" for none)

  // "https://hc-ping.com", "http://127.0.0.1:8000": all a message, a trace or
  // --json may say of it. The path and query are the check's credential.
  std::string shown() const;
};

// `text` with each "{key}" replaced by `key`, percent-encoded (every byte
// but RFC 3986's unreserved ones): healthchecks' slug URLs, one setting for
// every job of a host.
std::string expand_key(std::string_view text, std::string_view key);

// Parses an http:// or https:// URL: scheme, host (a name, an IPv4 address,
// or an IPv6 one in []), an optional port, path and query; a fragment is
// dropped. Throws util::Error (usage) naming the scheme and host at most,
// never the path: no user:password@, no other scheme, no control characters
// or spaces (they would split the request line).
PingUrl parse_ping_url(std::string_view text);

// A random run id (healthchecks' `rid`): a UUID, version 4.
std::string make_run_id();

// The bytes of the GET of `url` with `suffix` ("/start", "/1", "") after its
// path and rid=`rid` in its query.
std::string ping_request(const PingUrl& url, std::string_view suffix, std::string_view rid);

}  // namespace nxlock::run
