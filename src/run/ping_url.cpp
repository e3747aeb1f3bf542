// PingUrl: parsing, {key}, the run id and the request's bytes.
#include "run/ping_url.hpp"

#include <charconv>
#include <cstdint>

#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/random.hpp"

namespace nxlock::run {

namespace {

using util::Error;
using util::ErrorKind;

constexpr std::string_view k_ping_option = "--ping";

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

std::string ping_host_text(const PingUrl& url) {
  return url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
}

[[noreturn]] void refuse_ping_url(const std::string& why) {
  throw Error(ErrorKind::usage, std::string(k_ping_option), why);
}

}  // namespace

std::string PingUrl::shown() const {
  std::string text = tls ? "https://" : "http://";
  text += ping_host_text(*this);
  if (port != (tls ? 443 : 80)) {
    text += ":" + std::to_string(port);
  }
  return text;
}

std::string expand_key(std::string_view text, std::string_view key) {
  constexpr std::string_view placeholder = "{key}";
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string encoded;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (unreserved(byte)) {
      encoded.push_back(c);
    } else {
      encoded += '%';
      encoded += k_hex[byte >> 4];
      encoded += k_hex[byte & 15];
    }
  }
  std::string out;
  for (std::size_t at = 0;;) {
    const std::size_t found = text.find(placeholder, at);
    out.append(text.substr(at, found - at));
    if (found == std::string_view::npos) {
      return out;
    }
    out += encoded;
    at = found + placeholder.size();
  }
}

PingUrl parse_ping_url(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      // Never echoed: the bytes around it may be the credential.
      refuse_ping_url("the URL holds a space or a control character");
    }
  }
  PingUrl url;
  std::string_view rest;
  if (text.starts_with("https://")) {
    url.tls = true;
    url.port = 443;
    rest = text.substr(8);
  } else if (text.starts_with("http://")) {
    rest = text.substr(7);
  } else {
    refuse_ping_url("an http:// or https:// URL is needed");
  }
  if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) {
    rest = rest.substr(0, hash);
  }
  const std::size_t end_of_authority = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, end_of_authority);
  rest = end_of_authority == std::string_view::npos ? std::string_view()
                                                     : rest.substr(end_of_authority);
  if (authority.find('@') != std::string_view::npos) {
    refuse_ping_url("no user or password in the URL: its path is the credential");
  }
  std::string_view port_text;
  if (authority.starts_with("[")) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      refuse_ping_url("an IPv6 address needs its closing ]");
    }
    url.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        refuse_ping_url("expected :PORT after the IPv6 address");
      }
      port_text = after.substr(1);
    }
    if (url.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      refuse_ping_url("not an IPv6 address between [ and ]");
    }
  } else {
    const std::size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
    if (url.host.find_first_of("[]:") != std::string::npos) {
      refuse_ping_url("a host name, an IPv4 address or an IPv6 one in [] is needed");
    }
  }
  if (url.host.empty()) {
    refuse_ping_url("no host in the URL");
  }
  if (url.host.size() > 253) {
    refuse_ping_url("the host name is too long");
  }
  if (!port_text.empty() || authority.ends_with(":")) {
    int port = 0;
    const auto [end, error] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      refuse_ping_url("the port of " + url.shown() + " must be a number from 1 to 65535");
    }
    url.port = port;
  }
  const std::size_t question = rest.find('?');
  url.path = std::string(rest.substr(0, question));
  if (question != std::string_view::npos) {
    url.query = std::string(rest.substr(question + 1));
  }
  while (url.path.ends_with("/")) {
    url.path.pop_back();  // URL/start, not URL//start
  }
  return url;
}

std::string make_run_id() {
  const std::uint64_t high = (util::random_u64() & ~0xf000ULL) | 0x4000ULL;  // version 4
  const std::uint64_t low = (util::random_u64() & ~(3ULL << 62)) | (2ULL << 62);  // RFC 4122
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string id;
  for (int nibble = 0; nibble < 32; ++nibble) {
    if (nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20) {
      id += '-';
    }
    const std::uint64_t word = nibble < 16 ? high : low;
    id += k_hex[(word >> (60 - 4 * (nibble % 16))) & 15];
  }
  return id;
}

std::string ping_request(const PingUrl& url, std::string_view suffix, std::string_view rid) {
  std::string request = "GET ";
  request += url.path.empty() && suffix.empty() ? "/" : url.path;
  request += suffix;
  request += '?';
  if (!url.query.empty()) {
    request += url.query;
    request += '&';
  }
  request += "rid=";
  request += rid;
  request += " HTTP/1.1\r\nHost: ";
  request += ping_host_text(url);
  if (url.port != (url.tls ? 443 : 80)) {
    request += ":" + std::to_string(url.port);
  }
  request += "\r\nUser-Agent: nxlock\r\nConnection: close\r\n\r\n";
  return request;
}

}  // namespace nxlock::run
