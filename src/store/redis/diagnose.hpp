// What the Redis diagnosis's files share: reply helpers, the checks of INFO, and asking
// the Sentinels.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/diagnosis.hpp"
#include "store/redis/connection.hpp"

namespace nxlock::store::redis::doctor {

// A string, status or error reply's text; "" for any other reply.
std::string_view text_of(const redisReply& reply);

// The error an error reply stands for (as reply.hpp maps it: auth and ACL
// refusals are permission); nullopt for any other reply.
std::optional<util::Error> reply_error(const redisReply& reply, const Command& command,
                                       const std::string& name);

// Asks every Sentinel of a redis+sentinel:// URL about its master, a check
// each (and one that stops the diagnosis when none answered); returns where
// the first that knows the master says it is.
std::optional<HostPort> ask_sentinels(const Url& url, const ConnectOptions& options,
                                      const std::shared_ptr<net::TlsContext>& tls,
                                      std::vector<Check>& checks);

// Whether a failover of a Sentinel-watched master can split a lock in two:
// not with --replicas (`replicas`), nor when the master refuses writes that no
// replica can get (min-replicas-to-write, `min_replicas_reply` its CONFIG GET).
Check failover_check(int replicas, const redisReply& min_replicas_reply);

// The server's version from INFO; sets `too_old` below fitness.hpp's minimum.
Check version_check(std::string_view info, bool& too_old);
// How the server keeps data over a restart: INFO and CONFIG GET save / appendonly.
Check persistence_check(std::string_view info, const redisReply& save,
                        const redisReply& appendonly);
// A master with enough replicas online for --replicas (`replicas`), or a replica.
Check replication_check(std::string_view info, int replicas);

}  // namespace nxlock::store::redis::doctor
