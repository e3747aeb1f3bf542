// EtcdClient: one call, tried on each member in turn within --io-timeout; server errors mapped.
#include "store/etcd/etcd_client.hpp"

#include <algorithm>

#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::store::etcd {

namespace {

using util::Error;
using util::ErrorKind;
using util::Micros;

bool mentions(const std::string& text, std::string_view words) {
  return text.find(words) != std::string::npos;
}

// The server's error in a gateway answer: {"code":N,"message":...} for a
// unary call, {"error":{"grpc_code":N,"message":...}} in a stream.
std::optional<ServerError> server_error_in(const nlohmann::json& answer) {
  if (!answer.is_object()) {
    return std::nullopt;
  }
  const auto error = answer.find("error");
  if (error != answer.end() && error->is_object()) {
    ServerError out;
    out.code = error->value("grpc_code", 2);
    out.message = error->value("message", std::string("unknown error"));
    return out;
  }
  const auto code = answer.find("code");
  if (code != answer.end() && code->is_number_integer() && code->get<int>() != 0) {
    ServerError out;
    out.code = code->get<int>();
    out.message = answer.value("message", answer.value("error", std::string("unknown error")));
    return out;
  }
  return std::nullopt;
}

// etcd's response header, on every answer that is not an error: the cluster
// and the member that answered. A unary call's is at the top, a stream's
// (the keepalive) in its "result".
bool has_etcd_header(const nlohmann::json& answer) {
  const auto result = answer.find("result");
  const nlohmann::json& holder =
      result != answer.end() && result->is_object() && !answer.contains("header") ? *result : answer;
  const auto header = holder.find("header");
  return header != holder.end() && header->is_object() && header->contains("cluster_id") &&
         header->contains("member_id");
}

// An answer that is not etcd's: 69, saying what answered.
[[noreturn]] void not_etcd(HttpConnection& conn, const HttpResponse& response, const char* what) {
  conn.close();
  throw Error(ErrorKind::unavailable, conn.describe(),
              "not an etcd v3 gateway (it answered " + what_answered(response) + " " + what + ")");
}

// Checks that `response` is etcd's, and returns its JSON. etcd 3.4 answers
// an alarm GET that finds none with `{}`, leaving out its header: that path
// is not asked for one (a member's status, which doctor asks first, is).
nlohmann::json etcd_answer(HttpConnection& conn, const HttpResponse& response,
                           std::string_view path, std::optional<ServerError>& error) {
  nlohmann::json answer = nlohmann::json::parse(response.body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    not_etcd(conn, response, answer.is_discarded() ? "with a body that is not JSON" : "with no JSON object");
  }
  error = server_error_in(answer);
  if (!error && response.status != 200) {
    not_etcd(conn, response, "with no error of etcd's");
  }
  if (!error && path != "/v3/maintenance/alarm" && !has_etcd_header(answer)) {
    not_etcd(conn, response, "without etcd's response header");
  }
  return answer;
}

}  // namespace

bool member_trouble(const ServerError& error) {
  // Unavailable (no leader, leader changed, stopping, timed out) and
  // DeadlineExceeded; Canceled is what a member says as it shuts down.
  return error.code == static_cast<int>(Code::unavailable) || error.code == 4 || error.code == 1 ||
         mentions(error.message, "no leader") || mentions(error.message, "leader changed") ||
         mentions(error.message, "request timed out");
}

EtcdClient::EtcdClient(ClientConfig config) : m_config(std::move(config)) {
  m_endpoint.name = m_config.name;
  m_endpoint.timeout_seconds = m_config.timeout_seconds;
  m_endpoint.tls = m_config.tls;
  m_connections.resize(m_config.members.size());
}

EtcdClient::~EtcdClient() {
  for (auto& conn : m_connections) {
    if (conn) {
      conn->drain(deadline_from_now());
    }
  }
}

HttpConnection& EtcdClient::connection(std::size_t member) {
  auto& slot = m_connections[member];
  if (!slot) {
    slot = std::make_unique<HttpConnection>(m_endpoint, m_config.members[member]);
  }
  return *slot;
}

net::Deadline EtcdClient::deadline_from_now() const {
  const Micros budget(static_cast<std::int64_t>(m_config.timeout_seconds * 1e6));
  const Micros at = util::mono_now() + budget;
  if (m_cap && *m_cap < at) {
    return {*m_cap, m_config.timeout_seconds, true};
  }
  return {at, m_config.timeout_seconds, false};
}

std::string EtcdClient::headers() const {
  return m_token ? "Authorization: " + *m_token + "\r\n" : std::string();
}

nlohmann::json EtcdClient::exchange(std::size_t member, std::string_view path,
                                    const std::string& body, const net::Deadline& deadline,
                                    std::optional<ServerError>& error) {
  HttpConnection& conn = connection(member);
  const HttpResponse response =
      conn.exchange(format_post(m_config.members[member], path, body, headers()), deadline);
  nlohmann::json answer = etcd_answer(conn, response, path, error);
  if (util::tracing()) {
    util::trace("etcd: " + std::string(path) + " on " + conn.describe() + ": " +
                (error ? "error " + std::to_string(error->code) + " " + util::escape(error->message)
                       : "ok"));
  }
  return answer;
}

void EtcdClient::authenticate(std::size_t member, const net::Deadline& deadline) {
  m_token.reset();
  const nlohmann::json request = {{"name", m_config.user.value_or("root")},
                                  {"password", *m_config.password}};
  std::optional<ServerError> error;
  const nlohmann::json answer = exchange(member, "/v3/auth/authenticate", request.dump(), deadline, error);
  if (error) {
    if (mentions(error->message, "authentication is not enabled")) {
      m_auth_checked = true;
      return;  // no token needed: the calls go without one
    }
    if (member_trouble(*error)) {
      // Checked only once a member said: the next one authenticates instead.
      throw Error(ErrorKind::unavailable, connection(member).describe(), util::escape(error->message));
    }
    throw_server_error(*error);
  }
  const auto token = answer.find("token");
  if (token == answer.end() || !token->is_string()) {
    throw Error(ErrorKind::internal, m_config.name, "unexpected answer from etcd (no token)");
  }
  m_token = token->get<std::string>();
  m_auth_checked = true;
}

void EtcdClient::throw_server_error(const ServerError& error) const {
  const std::string& m = error.message;
  if (error.code == static_cast<int>(Code::permission_denied) ||
      error.code == static_cast<int>(Code::unauthenticated) || mentions(m, "authentication failed") ||
      mentions(m, "user name is empty") || mentions(m, "invalid auth token")) {
    throw Error(ErrorKind::permission, m_config.name,
                util::escape(m) +
                    (m_config.password ? "" : " (give USER:PASSWORD@ in the URL, or --password-file)"));
  }
  if (error.code == static_cast<int>(Code::resource_exhausted) || mentions(m, "space exceeded")) {
    throw Error(ErrorKind::unavailable, m_config.name,
                util::escape(m) +
                    " (the NOSPACE alarm is on: compact and defragment, then `etcdctl alarm disarm`)");
  }
  if (member_trouble(error)) {
    throw Error(ErrorKind::unavailable, m_config.name, util::escape(m));
  }
  if (mentions(m, "request is too large")) {
    throw Error(ErrorKind::usage, m_config.name,
                "the key is too large for etcd's request limit (the members' "
                "--max-request-bytes, 1.5 MiB unless set; a lock's request carries its key "
                "several times): " + util::escape(m));
  }
  throw Error(ErrorKind::internal, m_config.name, "etcd refused the request: " + util::escape(m));
}

std::optional<nlohmann::json> EtcdClient::call_unless(std::string_view path,
                                                      const nlohmann::json& request, Code code) {
  const net::Deadline whole = deadline_from_now();
  const std::string body = request.dump();
  const std::size_t n = m_config.members.size();
  std::optional<Error> last;
  std::string said;  // what each member tried did: "a:2379: connection refused; ..."
  std::size_t tried = 0;
  for (; tried < n; ++tried) {
    const std::size_t member = (m_current + tried) % n;
    const Micros now = util::mono_now();
    if (now >= whole.at && tried > 0) {
      break;
    }
    // A member that hangs gets its share of what is left, not all of it.
    const Micros share = std::max(whole.at - now, Micros(0)) / static_cast<std::int64_t>(n - tried);
    const net::Deadline deadline{now + share, static_cast<double>(share.count()) / 1e6,
                                 whole.capped};
    try {
      if (m_config.password && !m_auth_checked) {
        authenticate(member, deadline);
      }
      std::optional<ServerError> error;
      nlohmann::json answer = exchange(member, path, body, deadline, error);
      if (error && m_token && error->code == static_cast<int>(Code::unauthenticated)) {
        authenticate(member, deadline);  // the token expired: once more with a new one
        answer = exchange(member, path, body, deadline, error);
      }
      if (!error) {
        m_current = member;
        return answer;
      }
      if (error->code == static_cast<int>(code)) {
        m_current = member;
        return std::nullopt;
      }
      if (!member_trouble(*error)) {
        m_current = member;
        throw_server_error(*error);
      }
      last = Error(ErrorKind::unavailable, connection(member).describe(), util::escape(error->message));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::unavailable || mentions(e.reason(), "NOSPACE")) {
        throw;
      }
      last = e;
    }
    said += (said.empty() ? "" : "; ") + member_address(m_config.members[member]) + ": " +
            last->reason();
    util::trace("etcd: " + std::string(last->what()) + (tried + 1 < n ? "; trying the next member" : ""));
  }
  if (n == 1 && last) {
    throw *last;
  }
  // What each one did (refused, reset, timed out within its share...), and
  // the whole timeout only if it was spent.
  std::string untried;
  for (std::size_t i = tried; i < n; ++i) {
    untried += (untried.empty() ? "" : ", ") + member_address(m_config.members[(m_current + i) % n]);
  }
  const std::string budget =
      util::seconds_text(Micros(static_cast<std::int64_t>(whole.seconds * 1e6)));
  throw Error(ErrorKind::unavailable, m_config.name,
              "no member answered" +
                  (util::mono_now() >= whole.at ? " within " + budget : std::string()) + " (" +
                  said + (untried.empty() ? "" : "; not tried, no time left: " + untried) + ")");
}

nlohmann::json EtcdClient::call(std::string_view path, const nlohmann::json& request) {
  // Code 0 never comes as an error: every server error throws.
  return *call_unless(path, request, Code::ok);
}

nlohmann::json EtcdClient::call_member(std::size_t member, std::string_view path,
                                       const nlohmann::json& request) {
  const net::Deadline deadline = deadline_from_now();
  if (m_config.password && !m_auth_checked) {
    authenticate(member, deadline);
  }
  std::optional<ServerError> error;
  nlohmann::json answer = exchange(member, path, request.dump(), deadline, error);
  if (error) {
    throw_server_error(*error);
  }
  return answer;
}

std::vector<nlohmann::json> EtcdClient::call_pipelined(std::string_view path,
                                                       const std::vector<nlohmann::json>& requests) {
  std::vector<nlohmann::json> answers;
  if (requests.empty()) {
    return answers;
  }
  if (m_config.password && !m_auth_checked) {
    authenticate(m_current, deadline_from_now());
  }
  // Sent in batches: a member reads a pipeline's requests as it answers them,
  // and neither side's buffers need hold all of it.
  constexpr std::size_t k_batch = 256;
  for (std::size_t first = 0; first < requests.size(); first += k_batch) {
    const std::size_t count = std::min(k_batch, requests.size() - first);
    std::string bytes;
    for (std::size_t i = first; i < first + count; ++i) {
      bytes += format_post(m_config.members[m_current], path, requests[i].dump(), headers());
    }
    HttpConnection& conn = connection(m_current);
    for (HttpResponse& response : conn.exchange_many(bytes, count, deadline_from_now())) {
      std::optional<ServerError> error;
      nlohmann::json answer = etcd_answer(conn, response, path, error);
      if (error) {
        throw_server_error(*error);
      }
      answers.push_back(std::move(answer));
    }
  }
  return answers;
}

void EtcdClient::call_later(std::string_view path, const nlohmann::json& request) {
  try {
    connection(m_current).send_only(
        format_post(m_config.members[m_current], path, request.dump(), headers()),
        deadline_from_now());
  } catch (const Error& e) {
    util::trace(std::string("etcd: ") + e.what());
  }
}

std::unique_ptr<HttpConnection> EtcdClient::open_stream(std::string_view path,
                                                        const nlohmann::json& request) {
  const std::size_t n = m_config.members.size();
  std::optional<Error> last;
  const std::string body = request.dump();
  for (std::size_t tried = 0; tried < n; ++tried) {
    const std::size_t member = (m_current + tried) % n;
    auto stream = std::make_unique<HttpConnection>(m_endpoint, m_config.members[member]);
    try {
      // etcd's require-leader (rpctypes.MetadataRequireLeaderKey), passed on by the gateway.
      stream->open_stream(format_post(m_config.members[member], path, body,
                                      headers() + "Grpc-Metadata-hasleader: true\r\n"),
                          deadline_from_now());
      return stream;
    } catch (const Error& e) {
      last = e;
    }
  }
  throw *last;
}

}  // namespace nxlock::store::etcd
