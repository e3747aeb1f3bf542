// protocol_probe: what listens on a port that closed the connection on our protocol (HTTP or Redis's).
//
// Redis closes the connection on an HTTP request (its cross-protocol guard),
// and etcd on anything that is neither HTTP nor gRPC: each without a word. So
// a server that closed a fresh connection before answering anything is asked,
// on a connection of its own, in the other protocol, and the message says what
// answered. Only then: a probe costs a connect.
#pragma once

#include <optional>
#include <string>

#include "store/net/deadline.hpp"
#include "store/net/endpoint.hpp"

namespace nxlock::store {

// Why a Redis connection to host:port (or the endpoint's unix socket, over
// its TLS if it has one) was closed before a word, if an HTTP server listens
// there: "not a Redis server (it closed the connection on a Redis command, and
// answers HTTP: etcd 3.4.23; its URLs are etcd://)", or its status line quoted
// for another one. nullopt if nothing answers GET /version by `deadline`.
// Never throws.
std::optional<std::string> http_instead_of_redis(const net::Endpoint& endpoint,
                                                 const std::string& host, int port,
                                                 const net::Deadline& deadline);

// The same for an etcd connection, if a Redis server listens there: "not an
// etcd v3 gateway (it closed the connection on an HTTP request, and answers
// Redis's PING with `+PONG`: ...)". nullopt if nothing answers PING.
std::optional<std::string> redis_instead_of_http(const net::Endpoint& endpoint,
                                                 const std::string& host, int port,
                                                 const net::Deadline& deadline);

}  // namespace nxlock::store
