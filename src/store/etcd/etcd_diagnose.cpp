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
  // Authenticate says first whether auth is on at all; a user that does not
  // exist costs the server no bcrypt.
  try {
    const json probe = {{"name", url.user.value_or("nxlock-doctor-probe")},
                        {"password", options.password.value_or(url.password.value_or(""))}};
    client.call("/v3/auth/authenticate", probe);
    diagnosis.checks.push_back(Check::ok("auth", "on, the credentials are accepted"));
  } catch (const Error& e) {
    if (e.reason().find("not enabled") != std::string::npos) {
      diagnosis.checks.push_back(Check::ok("auth", "off"));
    } else if (url.password || options.password) {
      diagnosis.checks.push_back(Check::fail("auth", "on: " + util::escape(e.reason()),
                                             "check USER:PASSWORD@ or --password-file"));
    } else {
      diagnosis.checks.push_back(Check::ok("auth", "on"));
    }
  }
  return diagnosis;
}

}  // namespace nxlock::store
