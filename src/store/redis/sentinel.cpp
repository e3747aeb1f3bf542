// SentinelLocator: the Sentinel client protocol's discovery step, one Sentinel after another.
#include "store/redis/sentinel.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "util/error.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

namespace nxlock::store::redis {

namespace {

using util::Error;
using util::ErrorKind;

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

// SENTINEL MASTER's "config-epoch" field (-1 if it has none): a flat list of
// names and values.
long long config_epoch(const redisReply& reply) {
  long long epoch = -1;
  if (reply.type != REDIS_REPLY_ARRAY) {
    return epoch;
  }
  for (std::size_t i = 0; i + 1 < reply.elements; i += 2) {
    const redisReply& name = *reply.element[i];
    const redisReply& value = *reply.element[i + 1];
    if (name.type == REDIS_REPLY_STRING && value.type == REDIS_REPLY_STRING &&
        std::string_view(name.str, name.len) == "config-epoch") {
      std::from_chars(value.str, value.str + value.len, epoch);
    }
  }
  return epoch;
}

// An equal share of what is left before `cap` for each of the `left`
// Sentinels still to ask: one that hangs leaves the others time to answer.
std::optional<util::Micros> share_of(std::optional<util::Micros> cap, std::size_t left) {
  if (!cap) {
    return cap;
  }
  const util::Micros now = util::mono_now();
  if (*cap <= now) {
    return cap;
  }
  return now + (*cap - now) / static_cast<long long>(left);
}

}  // namespace

SentinelLocator::SentinelLocator(std::string name, std::vector<HostPort> sentinels,
                                 std::string master, std::optional<std::string> password,
                                 double timeout_seconds, std::shared_ptr<net::TlsContext> tls)
    : m_name(std::move(name)),
      m_sentinels(std::move(sentinels)),
      m_master(std::move(master)),
      m_password(std::move(password)),
      m_timeout_seconds(timeout_seconds),
      m_tls(std::move(tls)) {}

SentinelLocator::~SentinelLocator() = default;

std::unique_ptr<Connection> SentinelLocator::connect_to_sentinel(const HostPort& sentinel) const {
  net::Endpoint endpoint;
  endpoint.name = "Sentinel " + host_port_text(sentinel);
  endpoint.host = sentinel.host;
  endpoint.port = sentinel.port;
  endpoint.timeout_seconds = m_timeout_seconds;
  endpoint.tls = m_tls;
  std::vector<std::vector<std::string>> setup;
  if (m_password) {
    setup.push_back({"AUTH", *m_password});
  }
  return std::make_unique<Connection>(std::move(endpoint), std::move(setup));
}

std::optional<HostPort> SentinelLocator::master_address(const redisReply& reply,
                                                        const Command& command,
                                                        const std::string& sentinel_name) const {
  if (reply.type == REDIS_REPLY_ERROR) {
    throw_reply_error(reply, command, sentinel_name);
  }
  if (reply.type == REDIS_REPLY_NIL) {
    return std::nullopt;
  }
  // [host, port], both strings.
  int port = 0;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 ||
      reply.element[0]->type != REDIS_REPLY_STRING ||
      reply.element[1]->type != REDIS_REPLY_STRING ||
      std::from_chars(reply.element[1]->str, reply.element[1]->str + reply.element[1]->len, port)
              .ec != std::errc() ||
      port <= 0 || port > 65535) {
    throw Error(ErrorKind::unavailable, sentinel_name,
                "unexpected reply: " + describe_reply(reply));
  }
  HostPort master{std::string(reply.element[0]->str, reply.element[0]->len), port};
  if (util::tracing()) {
    util::trace("redis: " + sentinel_name + " says " + describe() + " is at " +
                host_port_text(master));
  }
  return master;
}

HostPort SentinelLocator::locate(std::optional<util::Micros> cap) {
  std::vector<std::string> unreachable;  // "HOST:PORT: why"
  std::vector<std::string> unknowing;    // Sentinels that do not know the master
  bool refused_password = false;
  for (std::size_t i = 0; i < m_sentinels.size(); ++i) {
    const HostPort sentinel = m_sentinels[i];
    const std::string sentinel_name = "Sentinel " + host_port_text(sentinel);
    if (i != 0 || !m_connection) {
      m_connection = connect_to_sentinel(sentinel);
    }
    m_connection->set_cap(share_of(cap, m_sentinels.size() - i));
    const Command command{{"SENTINEL", "get-master-addr-by-name", m_master}, {}};
    try {
      const auto replies = m_connection->exchange({command});
      const auto master = master_address(*replies.front(), command, sentinel_name);
      if (!master) {
        unknowing.push_back(host_port_text(sentinel));
        m_connection.reset();
        continue;
      }
      // The spec's advice: the Sentinel that answered is asked first next time.
      std::rotate(m_sentinels.begin(), m_sentinels.begin() + static_cast<std::ptrdiff_t>(i),
                  m_sentinels.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return *master;
    } catch (const Error& e) {
      if (util::tracing()) {
        util::trace("redis: " + sentinel_name + ": " + e.reason());
      }
      refused_password = refused_password || e.kind() == ErrorKind::permission;
      unreachable.push_back(host_port_text(sentinel) + ": " + e.reason());
      m_connection.reset();
    }
  }
  if (!unknowing.empty()) {
    throw Error(ErrorKind::unavailable, m_name,
                "no Sentinel knows master '" + m_master + "'" +
                    (unreachable.empty() ? "" : " (unreachable: " + join(unreachable) + ")"));
  }
  if (refused_password) {
    throw Error(ErrorKind::permission, m_name,
                "no Sentinel accepted the Sentinel password (" + join(unreachable) + ")");
  }
  throw Error(ErrorKind::unavailable, m_name, "no Sentinel reachable (" + join(unreachable) + ")");
}

std::optional<HostPort> SentinelLocator::recheck(const HostPort& current,
                                                 std::optional<util::Micros> cap, bool thorough) {
  const auto moved = [&](const HostPort& master) -> std::optional<HostPort> {
    if (master.host == current.host && master.port == current.port) {
      return std::nullopt;
    }
    return master;
  };
  if (!thorough) {
    return moved(locate(cap));
  }
  // Every Sentinel, each with its configuration epoch: the one that ran a
  // failover names the new master (and a higher epoch) before the others hear
  // of it, and the old master takes writes until the Sentinels demote it.
  std::optional<HostPort> newest;
  long long newest_epoch = -1;
  std::size_t newest_index = 0;
  const Command address{{"SENTINEL", "get-master-addr-by-name", m_master}, {}};
  const Command details{{"SENTINEL", "MASTER", m_master}, {}};
  for (std::size_t i = 0; i < m_sentinels.size(); ++i) {
    const std::string sentinel_name = "Sentinel " + host_port_text(m_sentinels[i]);
    std::unique_ptr<Connection> asked =
        i == 0 && m_connection ? std::move(m_connection) : connect_to_sentinel(m_sentinels[i]);
    asked->set_cap(share_of(cap, m_sentinels.size() - i));
    try {
      const auto replies = asked->exchange({address, details});
      const auto master = master_address(*replies[0], address, sentinel_name);
      const long long epoch = config_epoch(*replies[1]);
      if (util::tracing()) {
        util::trace("redis: " + sentinel_name + ": configuration epoch " + std::to_string(epoch));
      }
      if (master && epoch > newest_epoch) {
        newest = master;
        newest_epoch = epoch;
        newest_index = i;
      }
      if (i == 0) {
        m_connection = std::move(asked);
      }
    } catch (const Error& e) {
      if (util::tracing()) {
        util::trace("redis: " + sentinel_name + ": " + e.reason());
      }
    }
  }
  if (!newest) {
    return moved(locate(cap));  // says why no Sentinel answers
  }
  if (newest_index != 0) {
    m_connection.reset();
    std::rotate(m_sentinels.begin(),
                m_sentinels.begin() + static_cast<std::ptrdiff_t>(newest_index),
                m_sentinels.begin() + static_cast<std::ptrdiff_t>(newest_index) + 1);
  }
  return moved(*newest);
}

bool says_demoted(const Command& command, const redisReply& reply) {
  if (const auto error = error_of(reply)) {
    return error->code == "READONLY" || error->code == "MASTERDOWN" || error->code == "UNBLOCKED";
  }
  if (reply.type != REDIS_REPLY_INTEGER || command.args.size() < 2 ||
      (command.args[0] != "WAIT" && command.args[0] != "wait")) {
    return false;
  }
  long long wanted = 0;
  std::from_chars(command.args[1].data(), command.args[1].data() + command.args[1].size(), wanted);
  return reply.integer < wanted;
}

void SentinelLocator::wrong_role(const HostPort& address, const std::string& role) {
  (void)address;
  (void)role;
  // The Sentinel that named it has not seen the failover yet: ask the others
  // first (with one Sentinel, it is simply asked again).
  m_connection.reset();
  std::rotate(m_sentinels.begin(), m_sentinels.begin() + 1, m_sentinels.end());
}

}  // namespace nxlock::store::redis
