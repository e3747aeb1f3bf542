// etcd's diagnosis (`nxlock doctor`): each member reachable, a leader, the version, alarms, auth.
#include <set>

#include "store/diagnosis.hpp"
#include "store/etcd/etcd_json.hpp"
#include "store/etcd/etcd_store.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

namespace {

using nlohmann::json;
using util::Error;
using util::ErrorKind;

std::string member_name(const HostPort& member) {
  return (member.host.find(':') != std::string::npos ? "[" + member.host + "]" : member.host) +
         ":" + std::to_string(member.port);
}

bool says(const Error& error, std::string_view words) {
  return error.reason().find(words) != std::string::npos;
}

// What a lock on a key under `prefix` asks of the user: a txn that reads the
// range and may put a key in it (etcd checks both branches of a txn, run or
// not; this compare never holds, so nothing is written), and a lease, granted
// and revoked at once. Throws util::Error as the client does.
void try_lock_permissions(etcd::EtcdClient& client, const std::string& prefix) {
  const std::string probe = prefix + "nxlock-doctor-probe";
  const std::string from = prefix.empty() ? std::string(1, '\0') : prefix;
  client.call("/v3/kv/txn",
              {{"compare", json::array({{{"key", etcd::base64_encode(probe)},
                                         {"target", "CREATE"},
                                         {"result", "LESS"},
                                         {"create_revision", "0"}}})},
               {"success", json::array({{{"request_put", {{"key", etcd::base64_encode(probe)},
                                                           {"value", ""}}}}})},
               {"failure", json::array({{{"request_range",
                                          {{"key", etcd::base64_encode(from)},
                                           {"range_end", etcd::base64_encode(etcd::prefix_end(prefix))},
                                           {"count_only", true}}}}})}});
  const json grant = client.call("/v3/lease/grant", {{"TTL", 5}});
  client.call_unless("/v3/lease/revoke", {{"ID", std::to_string(etcd::int_field(grant, "ID", "lease"))}},
                     etcd::Code::not_found);
}

// Whether auth is on, and if so whether the user may take locks: the keys
// under --prefix (every key without one) and a lease.
Check auth_check(etcd::EtcdClient& client, const Url& url, const ConnectOptions& options) {
  const bool password = url.password || options.password;
  const std::string& prefix = options.key_prefix;
  const std::string where =
      prefix.empty() ? "every key" : "the keys under '" + util::escape(prefix) + "'";
  if (!password) {
    // Authenticate says whether auth is on at all; a user that does not
    // exist costs the server no bcrypt.
    try {
      client.call("/v3/auth/authenticate",
                  {{"name", url.user.value_or("nxlock-doctor-probe")}, {"password", ""}});
    } catch (const Error& e) {
      if (says(e, "not enabled")) {
        return Check::ok("auth", "off");
      }
      if (e.kind() != ErrorKind::permission) {
        return Check::skip("auth", "not checked: " + util::escape(e.reason()));
      }
      // On. A client certificate may still name a user (etcd's CN): try.
    }
  }
  try {
    try_lock_permissions(client, prefix);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::permission) {
      return Check::skip("auth", "not checked: " + util::escape(e.reason()));
    }
    if (!password) {
      return Check::stopping(ErrorKind::permission, "auth",
                             "on, and no credentials were given: a lock's requests are refused",
                             "give USER:PASSWORD@ in the URL, or --password-file");
    }
    if (says(e, "authentication failed")) {
      return Check::stopping(ErrorKind::permission, "auth", "on: " + util::escape(e.reason()),
                             "check USER:PASSWORD@ or --password-file");
    }
    const std::string user = util::escape(url.user.value_or("root"));
    const std::string denied = "on, user " + user + " is accepted but may not take locks on " +
                               where + ": " + util::escape(e.reason());
    const std::string grant = "etcdctl role grant-permission ROLE readwrite --prefix " +
                              (prefix.empty() ? std::string("PREFIX") : util::escape(prefix));
    if (prefix.empty()) {
      // Its locks may all be under one prefix: that is what --prefix checks.
      return Check::warn("auth", denied, "give --prefix to check the keys its locks use, or " + grant);
    }
    return Check::stopping(ErrorKind::permission, "auth", denied, "grant its role that: " + grant);
  }
  if (password && !client.has_token()) {
    return Check::ok("auth", "off");  // authenticate said so: the calls go without a token
  }
  return Check::ok("auth", "on, " +
                               (password ? "user " + util::escape(url.user.value_or("root"))
                                         : std::string("the client certificate's user")) +
                               " may take locks on " + where + " (a transaction there, a lease)");
}

}  // namespace

Diagnosis diagnose_etcd(const Url& url, const ConnectOptions& options) {
  Diagnosis diagnosis;
  diagnosis.backend = url.redacted;
  etcd::EtcdClient client(etcd_config(url, options));
  std::set<std::int64_t> leaders;
  std::set<std::string> versions;
  std::size_t reachable = 0;
  std::optional<Error> refused;
  std::optional<Error> foreign;  // a member that is not etcd at all
  for (std::size_t i = 0; i < client.members().size(); ++i) {
    const std::string name = "member " + member_name(client.members()[i]);
    try {
      const json status = client.call_member(i, "/v3/maintenance/status", json::object());
      ++reachable;
      const std::string version = status.value("version", std::string("?"));
      versions.insert(version);
      const std::int64_t leader = etcd::int_field(status, "leader", name);
      const std::int64_t self =
          etcd::int_field(status.value("header", json::object()), "member_id", name);
      if (leader != 0) {
        leaders.insert(leader);
      }
      diagnosis.checks.push_back(Check::ok(
          name, "etcd " + util::escape(version) +
                    (leader == 0 ? ", no leader" : leader == self ? ", leader" : ", follower")));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::permission) {
        refused = e;
      }
      const bool not_etcd = e.reason().starts_with("not an etcd v3 gateway");
      if (not_etcd) {
        foreign = e;
      }
      diagnosis.checks.push_back(Check::warn(
          name, util::escape(e.reason()),
          not_etcd ? "another service listens there: check the URL's host and port"
                   : "a lock is held while a majority of members answer"));
    }
  }
  if (refused && reachable == 0) {
    diagnosis.checks.push_back(Check::stopping(ErrorKind::permission, "credentials",
                                               util::escape(refused->reason()),
                                               "check USER:PASSWORD@ or --password-file"));
    return diagnosis;
  }
  if (foreign && reachable == 0) {
    diagnosis.checks.push_back(Check::stopping(ErrorKind::unavailable, "protocol",
                                               util::escape(foreign->reason()),
                                               "another service listens there: check the URL's "
                                               "host and port"));
    return diagnosis;
  }
  if (reachable == 0) {
    diagnosis.checks.push_back(Check::stopping(ErrorKind::unavailable, "reachable",
                                               "no member answered",
                                               "check the URL's members and that etcd runs"));
    return diagnosis;
  }
  if (leaders.empty()) {
    diagnosis.checks.push_back(Check::fail("leader", "none",
                                           "the cluster has lost its quorum: no lock can be taken"));
  } else if (leaders.size() > 1) {
    diagnosis.checks.push_back(Check::warn("leader", "members disagree (an election is under way?)",
                                           "run doctor again"));
  } else {
    diagnosis.checks.push_back(Check::ok("leader", "elected"));
  }
  if (versions.size() == 1 && versions.begin()->starts_with("3.") &&
      versions.begin()->compare("3.4") < 0) {
    diagnosis.checks.push_back(Check::fail("version", *versions.begin(),
                                           "the v3 JSON gateway's /v3/ paths need etcd 3.4 or later"));
  }
  try {
    const json alarms = client.call("/v3/maintenance/alarm", {{"action", "GET"}});
    std::string active;
    for (const auto& alarm : alarms.value("alarms", json::array())) {
      active += (active.empty() ? "" : ", ") + alarm.value("alarm", std::string("NONE"));
    }
    if (active.empty()) {
      diagnosis.checks.push_back(Check::ok("alarms", "none"));
    } else {
      diagnosis.checks.push_back(Check::fail(
          "alarms", util::escape(active),
          active.find("NOSPACE") != std::string::npos
              ? "every write fails: compact and defragment, then `etcdctl alarm disarm`"
              : "see `etcdctl alarm list`"));
    }
  } catch (const Error& e) {
    diagnosis.checks.push_back(Check::warn("alarms", util::escape(e.reason()), ""));
  }
  diagnosis.checks.push_back(auth_check(client, url, options));
  return diagnosis;
}

}  // namespace nxlock::store
