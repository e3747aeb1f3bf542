// Url: parsing of backend URLs.
#include "store/url.hpp"

#include <charconv>

#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/redact.hpp"

namespace nxlock::store {

namespace {

using util::Error;
using util::ErrorKind;

using util::k_redacted;

[[noreturn]] void bad_url(const std::string& redacted, const std::string& why) {
  throw Error(ErrorKind::usage, redacted, why);
}

// Decodes %XX escapes (passwords may contain '@' or ':'); nullopt if malformed.
std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size()) {
      return std::nullopt;
    }
    const auto* first = text.data() + i + 1;
    const auto [end, ec] = std::from_chars(first, first + 2, value, 16);
    if (ec != std::errc() || end != first + 2) {
      return std::nullopt;
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

// Parses a non-negative decimal integer no larger than `max`, the whole text.
std::optional<int> parse_uint(std::string_view text, int max) {
  int value = 0;
  if (text.empty()) {
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > max) {
    return std::nullopt;
  }
  return value;
}

// Splits "?a=1&b=2" style queries into the one parameter each scheme knows.
std::optional<std::string_view> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=') {
      return pair.substr(name.size() + 1);
    }
    if (amp == std::string_view::npos) {
      break;
    }
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

void check_query(const std::string& redacted, std::string_view query,
                 std::initializer_list<std::string_view> known) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    const auto name = pair.substr(0, pair.find('='));
    bool ok = false;
    for (auto k : known) {
      ok = ok || name == k;
    }
    if (!ok) {
      bad_url(redacted, "unknown parameter '" + util::escape(name) + "'");
    }
    if (amp == std::string_view::npos) {
      break;
    }
    query.remove_prefix(amp + 1);
  }
}

// [[USER]:PASSWORD@] at the front of `rest`, removed from it; the password may
// itself contain '@'.
void take_userinfo(std::string_view& rest, Url& url, const std::string& redacted) {
  const auto at = rest.rfind('@');
  if (at == std::string_view::npos) {
    return;
  }
  const auto userinfo = rest.substr(0, at);
  rest.remove_prefix(at + 1);
  const auto colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    bad_url(redacted, "expected USER:PASSWORD@ or :PASSWORD@ before the host");
  }
  const auto user = percent_decode(userinfo.substr(0, colon));
  const auto password = percent_decode(userinfo.substr(colon + 1));
  if (!user || !password) {
    bad_url(redacted, "malformed %-escape in the user or password");
  }
  if (!user->empty()) {
    url.user = *user;
  }
  url.password = *password;
}

// HOST[:PORT], HOST a name, an IPv4 address or [IPv6].
HostPort parse_host_port(std::string_view hostport, int default_port, const std::string& redacted) {
  HostPort out;
  out.port = default_port;
  std::string_view port_text;
  if (hostport.starts_with("[")) {  // [::1]:6379
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) {
      bad_url(redacted, "unterminated IPv6 address");
    }
    out.host = std::string(hostport.substr(1, close - 1));
    const auto after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        bad_url(redacted, "unexpected text after the IPv6 address");
      }
      port_text = after.substr(1);
      if (port_text.empty()) {
        bad_url(redacted, "empty port");
      }
    }
  } else {
    const auto colon = hostport.find(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      if (port_text.empty()) {
        bad_url(redacted, "empty port");
      }
    }
  }
  if (out.host.empty()) {
    bad_url(redacted, "no host");
  }
  if (!port_text.empty()) {
    const auto port = parse_uint(port_text, 65535);
    if (!port || *port == 0) {
      bad_url(redacted, "bad port '" + util::escape(port_text) + "' (1-65535)");
    }
    out.port = *port;
  }
  return out;
}

int parse_db(std::string_view text, const std::string& redacted) {
  const auto db = parse_uint(text, 1'000'000);
  if (!db) {
    bad_url(redacted, "the database must be a number, as in /0");
  }
  return *db;
}

Url parse_redis_tcp(std::string_view rest, const std::string& redacted) {
  Url url;
  url.scheme = Url::Scheme::redis_tcp;
  url.redacted = redacted;
  // [[USER]:PASSWORD@]HOST[:PORT][/DB]
  take_userinfo(rest, url, redacted);
  const auto slash = rest.find('/');
  if (slash != std::string_view::npos) {
    url.db = parse_db(rest.substr(slash + 1), redacted);
  }
  // HOST:PORT,HOST:PORT…: seed nodes of a Redis Cluster.
  auto hosts = rest.substr(0, slash);
  for (;;) {
    const auto comma = hosts.find(',');
    url.seeds.push_back(parse_host_port(hosts.substr(0, comma), 6379, redacted));
    if (comma == std::string_view::npos) {
      break;
    }
    hosts.remove_prefix(comma + 1);
  }
  url.host = url.seeds.front().host;
  url.port = url.seeds.front().port;
  return url;
}

// [[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]…]/MASTER[/DB]: the credentials
// are the master's; the Sentinels' own password comes from elsewhere.
Url parse_redis_sentinel(std::string_view rest, const std::string& redacted) {
  Url url;
  url.scheme = Url::Scheme::redis_sentinel;
  url.redacted = redacted;
  take_userinfo(rest, url, redacted);
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    bad_url(redacted, "no master name; use redis+sentinel://HOST[:PORT][,HOST[:PORT]…]/MASTER");
  }
  auto hosts = rest.substr(0, slash);
  auto path = rest.substr(slash + 1);
  const auto db_slash = path.find('/');
  url.master = std::string(path.substr(0, db_slash));
  if (url.master.empty()) {
    bad_url(redacted, "empty master name");
  }
  if (db_slash != std::string_view::npos) {
    url.db = parse_db(path.substr(db_slash + 1), redacted);
  }
  for (;;) {
    const auto comma = hosts.find(',');
    url.sentinels.push_back(parse_host_port(hosts.substr(0, comma), 26379, redacted));
    if (comma == std::string_view::npos) {
      break;
    }
    hosts.remove_prefix(comma + 1);
  }
  return url;
}

// [USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]…]: the members of one etcd cluster.
Url parse_etcd(std::string_view rest, const std::string& redacted) {
  Url url;
  url.scheme = Url::Scheme::etcd;
  url.redacted = redacted;
  take_userinfo(rest, url, redacted);
  if (rest.find_first_of("/?") != std::string_view::npos) {
    bad_url(redacted, "etcd:// takes no path or parameters: etcd://HOST[:PORT][,HOST[:PORT]…]");
  }
  for (;;) {
    const auto comma = rest.find(',');
    url.seeds.push_back(parse_host_port(rest.substr(0, comma), 2379, redacted));
    if (comma == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(comma + 1);
  }
  url.host = url.seeds.front().host;
  url.port = url.seeds.front().port;
  return url;
}

Url parse_unix(std::string_view rest, const std::string& redacted) {
  Url url;
  url.scheme = Url::Scheme::redis_unix;
  url.redacted = redacted;
  const auto question = rest.find('?');
  url.path = std::string(rest.substr(0, question));
  if (url.path.empty() || url.path[0] != '/') {
    bad_url(redacted, "the socket path must be absolute, as in unix:///run/redis/redis.sock");
  }
  if (question != std::string_view::npos) {
    const auto query = rest.substr(question + 1);
    check_query(redacted, query, {"db", "password", "user"});
    if (const auto db = query_param(query, "db")) {
      const auto n = parse_uint(*db, 1'000'000);
      if (!n) {
        bad_url(redacted, "db must be a number");
      }
      url.db = *n;
    }
    if (const auto user = query_param(query, "user")) {
      url.user = percent_decode(*user).value_or(std::string(*user));
    }
    if (const auto password = query_param(query, "password")) {
      url.password = percent_decode(*password).value_or(std::string(*password));
    }
  }
  return url;
}

Url parse_file(std::string_view rest, const std::string& redacted) {
  Url url;
  url.scheme = Url::Scheme::file;
  url.redacted = redacted;
  const auto question = rest.find('?');
  const auto path = percent_decode(rest.substr(0, question));
  if (!path || path->empty() || (*path)[0] != '/') {
    bad_url(redacted, "the store path must be absolute, as in file:///var/lib/nxlock");
  }
  url.path = *path;
  if (question != std::string_view::npos) {
    const auto query = rest.substr(question + 1);
    check_query(redacted, query, {"sync"});
    if (const auto sync = query_param(query, "sync")) {
      if (*sync != "0" && *sync != "1") {
        bad_url(redacted, "sync must be 0 or 1");
      }
      url.durable = *sync == "1";
    }
  }
  return url;
}

}  // namespace

std::string host_port_text(const HostPort& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

std::string redact_url(std::string_view text) {
  const auto scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) {
    return std::string(text);
  }
  std::string out(text);
  // redis://user:secret@host → redis://user:***@host
  const auto authority_start = scheme_end + 3;
  const auto at = out.rfind('@');
  if (at != std::string::npos && at > authority_start) {
    const auto colon = out.find(':', authority_start);
    if (colon != std::string::npos && colon < at) {
      out.replace(colon + 1, at - colon - 1, k_redacted);
    }
  }
  // unix:///sock?password=secret → password=***
  const auto param = out.find("password=");
  if (param != std::string::npos) {
    const auto value_start = param + 9;
    const auto value_end = out.find('&', value_start);
    out.replace(value_start,
                (value_end == std::string::npos ? out.size() : value_end) - value_start,
                k_redacted);
  }
  return out;
}

Url parse_url(std::string_view text) {
  const std::string redacted = util::escape(redact_url(text));  // for messages
  if (text.starts_with("redis://")) {
    return parse_redis_tcp(text.substr(8), redacted);
  }
  if (text.starts_with("unix://")) {
    return parse_unix(text.substr(7), redacted);
  }
  if (text.starts_with("file://")) {
    return parse_file(text.substr(7), redacted);
  }
  if (text.starts_with("rediss://")) {
    Url url = parse_redis_tcp(text.substr(9), redacted);
    url.tls = true;
    return url;
  }
  if (text.starts_with("redis+sentinel://")) {
    return parse_redis_sentinel(text.substr(17), redacted);
  }
  if (text.starts_with("rediss+sentinel://")) {
    Url url = parse_redis_sentinel(text.substr(18), redacted);
    url.tls = true;
    return url;
  }
  if (text.starts_with("etcd://")) {
    return parse_etcd(text.substr(7), redacted);
  }
  if (text.starts_with("etcds://")) {
    Url url = parse_etcd(text.substr(8), redacted);
    url.tls = true;
    return url;
  }
  if (text.empty()) {
    bad_url("''", "empty URL");
  }
  bad_url(redacted,
          "unknown scheme; use redis://, rediss://, redis+sentinel://, unix://, file:// or etcd://");
}

}  // namespace nxlock::store
