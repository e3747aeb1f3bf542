// send_ping: one ping, retried once, over the store's sockets and TLS
// (store/net) and read by its HTTP reader, by a deadline.
#pragma once

#include <string>
#include <string_view>

#include "run/ping_url.hpp"
#include "util/time.hpp"

namespace nxlock::run {

// Where pings are sent, and how an https:// checker is verified: against
// `cacert` (a PEM bundle), else the system's CAs. Never the backend's
// --cacert or --insecure: a checker is not the lock's server.
struct PingTarget {
  PingUrl url;
  std::string cacert;
};

// GETs `url`'s path + `suffix` with rid=`rid`, and waits for a 2xx answer,
// all by `deadline` (monotonic): name resolution is the one step a deadline
// cannot bound, so the caller runs this in a process it may kill. A failed
// first attempt (not a 4xx: the checker's verdict) is tried once more after
// a short pause, the first given half of the time left. Returns "" when the
// checker answered 2xx, else why not, in words that name the URL's scheme
// and host alone. Never throws.
std::string send_ping(const PingTarget& target, std::string_view suffix, std::string_view rid,
                      util::Micros deadline);

}  // namespace nxlock::run
