// EtcdClient: calls to one etcd cluster's v3 JSON gateway, on whichever member answers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/etcd/http_connection.hpp"
#include "store/net/endpoint.hpp"
#include "store/url.hpp"
#include "util/time.hpp"

namespace nxlock::store::etcd {

struct ClientConfig {
  std::string name;               // the redacted URL, for messages
  std::vector<HostPort> members;  // of one cluster, in the order given
  double timeout_seconds = 2.0;   // each call, whichever members it tries
  std::shared_ptr<net::TlsContext> tls;  // etcds://
  std::optional<std::string> user;
  std::optional<std::string> password;
};

// gRPC status codes the gateway passes on (google.golang.org/grpc/codes).
enum class Code : int {
  ok = 0,
  invalid_argument = 3,
  not_found = 5,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  unavailable = 14,
  unauthenticated = 16,
};

// An answer the server gave instead of a result.
struct ServerError {
  int code = 0;
  std::string message;
};

class EtcdClient {
 public:
  explicit EtcdClient(ClientConfig config);
  // Waits (within the timeout) for the answers of call_later() still unread.
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `request` to `path` (/v3/kv/range...) and returns the result. A
  // member that does not answer within its share of the timeout, or says it
  // has no leader, is left for the next one (and later calls start there).
  // Every member's answer, or the deadline's end, comes within --io-timeout (or
  // the cap, if sooner). Throws util::Error naming the URL: unavailable (69)
  // when no member answered, permission (77) for refused credentials, and the
  // server's other errors mapped by their code.
  nlohmann::json call(std::string_view path, const nlohmann::json& request);

  // call(), but the server's answer `code` comes back as nullopt instead of a throw.
  std::optional<nlohmann::json> call_unless(std::string_view path, const nlohmann::json& request,
                                            Code code);

  // The answers of `requests` to `path`, sent one after the other on one
  // connection before any answer is read (HTTP/1.1 pipelining: one round trip
  // for all), on the member that answered last. Throws as call(), trying no
  // other member.
  std::vector<nlohmann::json> call_pipelined(std::string_view path,
                                             const std::vector<nlohmann::json>& requests);

  // Sends `request` to the member that answered last and does not wait for
  // its answer (read and dropped before the next call). Failures are traced,
  // never thrown: for advisory writes.
  void call_later(std::string_view path, const nlohmann::json& request);

  // Opens a stream (/v3/watch) on a connection of its own to the member that
  // answered last, with etcd's require-leader: a member that loses its leader
  // ends the stream. Throws util::Error (unavailable) if it cannot connect.
  std::unique_ptr<HttpConnection> open_stream(std::string_view path, const nlohmann::json& request);

  // Caps every later call's deadline at this monotonic instant (nullopt: none).
  void set_cap(std::optional<util::Micros> cap) { m_cap = cap; }

  const std::string& name() const { return m_config.name; }
  // A token from authenticating is sent with each call (auth on, credentials accepted).
  bool has_token() const { return m_token.has_value(); }
  const std::vector<HostPort>& members() const { return m_config.members; }

  // One member's answer alone (doctor): no other member is tried. Throws as call().
  nlohmann::json call_member(std::size_t member, std::string_view path,
                             const nlohmann::json& request);

 private:
  // The answer of one member, or the server's error; throws util::Error
  // (unavailable) if the member did not answer by `deadline`.
  nlohmann::json exchange(std::size_t member, std::string_view path, const std::string& body,
                          const net::Deadline& deadline, std::optional<ServerError>& error);
  std::string headers() const;
  void authenticate(std::size_t member, const net::Deadline& deadline);
  [[noreturn]] void throw_server_error(const ServerError& error) const;
  net::Deadline deadline_from_now() const;
  HttpConnection& connection(std::size_t member);

  ClientConfig m_config;
  net::Endpoint m_endpoint;
  std::vector<std::unique_ptr<HttpConnection>> m_connections;
  std::size_t m_current = 0;  // the member tried first: the last that answered
  std::optional<util::Micros> m_cap;
  std::optional<std::string> m_token;  // from /v3/auth/authenticate
  bool m_auth_checked = false;
};

// Whether a server error means "try another member" (no leader, timed out, stopping).
bool member_trouble(const ServerError& error);

}  // namespace nxlock::store::etcd
