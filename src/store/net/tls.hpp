// Tls: TLS over a connected socket with OpenSSL, loaded (dlopen) only when a TLS URL is used.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "store/net/transport.hpp"
#include "util/error.hpp"

namespace nxlock::store::net {

// How a TLS server (rediss://, etcds://) is verified and what this client presents.
struct TlsConfig {
  std::string cacert;     // CA bundle file; empty: the system's CAs
  std::string cacertdir;  // hashed CA directory (c_rehash)
  std::string cert;       // client certificate chain (PEM)
  std::string key;        // its private key (PEM)
  std::string sni;        // the name to send and check instead of the URL's host
  bool insecure = false;  // skip chain and name verification
};

// The SSL_CTX and OpenSSL's function table, shared by a store's connections.
class TlsContext;

// Loads libssl (once per process) and builds a context from `config`. Throws
// util::Error naming `name`: unavailable (69) if libssl cannot be loaded,
// usage (64) for an unreadable CA, certificate or key file.
std::shared_ptr<TlsContext> make_tls_context(const TlsConfig& config, const std::string& name);

// One TLS session over a connected, non-blocking socket that the caller owns:
// the transport of a TLS connection, once handshake() is done.
class TlsSession final : public Transport {
 public:
  // `host` is the URL's host: the name (or IP) checked and sent as SNI,
  // unless the config's `sni` replaces it.
  TlsSession(std::shared_ptr<TlsContext> context, int fd, const std::string& host);
  ~TlsSession() override;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  IoResult handshake();
  IoResult read(char* buffer, std::size_t size) override;
  IoResult write(const char* buffer, std::size_t size) override;
  // Bytes OpenSSL has decrypted but not yet handed out.
  bool pending() const override;
  bool idle_alive() override;
  IoResult explain(const IoResult& result) override;

 private:
  IoResult result_of(int ret, const char* step);

  std::shared_ptr<TlsContext> m_context;
  void* m_ssl = nullptr;  // SSL*, kept opaque so no OpenSSL header leaks out
};

}  // namespace nxlock::store::net
