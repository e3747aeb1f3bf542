// Tls: OpenSSL resolved at run time (dlopen), so a plain redis:// invocation never pays for loading
// it.
#include "store/net/tls.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "util/escape.hpp"

namespace nxlock::store::net {

namespace {

using util::Error;
using util::ErrorKind;

// Linking libssl and libcrypto would cost every invocation their loading and
// relocation (BENCHMARKS.md, "Shared objects loaded at start"), TLS or not; the
// soname pins the ABI we were compiled against. The .deb depends on libssl3, which
// dpkg-shlibdeps cannot see through a dlopen.
constexpr const char* k_libssl = "libssl.so.3";

// The handful of OpenSSL functions nxlock calls, resolved from libssl (and
// libcrypto, which dlsym reaches through libssl's dependencies). Macros such
// as SSL_CTX_set_mode and SSL_set_tlsext_host_name are SSL_CTX_ctrl/SSL_ctrl.
struct Api {
  decltype(&::TLS_client_method) tls_client_method;
  decltype(&::SSL_CTX_new) ctx_new;
  decltype(&::SSL_CTX_free) ctx_free;
  decltype(&::SSL_CTX_ctrl) ctx_ctrl;
  decltype(&::SSL_CTX_set_verify) ctx_set_verify;
  decltype(&::SSL_CTX_set_default_verify_paths) ctx_set_default_verify_paths;
  decltype(&::SSL_CTX_load_verify_locations) ctx_load_verify_locations;
  decltype(&::SSL_CTX_use_certificate_chain_file) ctx_use_certificate_chain_file;
  decltype(&::SSL_CTX_use_PrivateKey_file) ctx_use_private_key_file;
  decltype(&::SSL_CTX_check_private_key) ctx_check_private_key;
  decltype(&::SSL_new) ssl_new;
  decltype(&::SSL_free) ssl_free;
  decltype(&::SSL_set_fd) set_fd;
  decltype(&::SSL_ctrl) ctrl;
  decltype(&::SSL_set1_host) set1_host;
  decltype(&::SSL_get0_param) get0_param;
  decltype(&::SSL_connect) connect;
  decltype(&::SSL_read) read;
  decltype(&::SSL_write) write;
  decltype(&::SSL_get_error) get_error;
  decltype(&::SSL_pending) pending;
  decltype(&::SSL_get_verify_result) get_verify_result;
  decltype(&::X509_VERIFY_PARAM_set1_ip_asc) param_set1_ip_asc;
  decltype(&::X509_verify_cert_error_string) verify_cert_error_string;
  decltype(&::ERR_get_error) err_get_error;
  decltype(&::ERR_error_string_n) err_error_string_n;
  decltype(&::ERR_clear_error) err_clear_error;
};

template <typename F>
bool resolve(void* handle, const char* name, F& target, std::string& missing) {
  target = reinterpret_cast<F>(dlsym(handle, name));
  if (target == nullptr && missing.empty()) {
    missing = name;
  }
  return target != nullptr;
}

// Loads libssl once per process; nullptr (and `error`) if it cannot.
const Api* load_api(std::string& error) {
  static Api api{};
  static std::string load_error;
  static const bool loaded = [] {
    void* handle = dlopen(k_libssl, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      load_error = std::string("TLS needs ") + k_libssl +
                   " (Debian: libssl3): " + (why ? why : "cannot load it");
      return false;
    }
    std::string missing;
    resolve(handle, "TLS_client_method", api.tls_client_method, missing);
    resolve(handle, "SSL_CTX_new", api.ctx_new, missing);
    resolve(handle, "SSL_CTX_free", api.ctx_free, missing);
    resolve(handle, "SSL_CTX_ctrl", api.ctx_ctrl, missing);
    resolve(handle, "SSL_CTX_set_verify", api.ctx_set_verify, missing);
    resolve(handle, "SSL_CTX_set_default_verify_paths", api.ctx_set_default_verify_paths, missing);
    resolve(handle, "SSL_CTX_load_verify_locations", api.ctx_load_verify_locations, missing);
    resolve(handle, "SSL_CTX_use_certificate_chain_file", api.ctx_use_certificate_chain_file,
            missing);
    resolve(handle, "SSL_CTX_use_PrivateKey_file", api.ctx_use_private_key_file, missing);
    resolve(handle, "SSL_CTX_check_private_key", api.ctx_check_private_key, missing);
    resolve(handle, "SSL_new", api.ssl_new, missing);
    resolve(handle, "SSL_free", api.ssl_free, missing);
    resolve(handle, "SSL_set_fd", api.set_fd, missing);
    resolve(handle, "SSL_ctrl", api.ctrl, missing);
    resolve(handle, "SSL_set1_host", api.set1_host, missing);
    resolve(handle, "SSL_get0_param", api.get0_param, missing);
    resolve(handle, "SSL_connect", api.connect, missing);
    resolve(handle, "SSL_read", api.read, missing);
    resolve(handle, "SSL_write", api.write, missing);
    resolve(handle, "SSL_get_error", api.get_error, missing);
    resolve(handle, "SSL_pending", api.pending, missing);
    resolve(handle, "SSL_get_verify_result", api.get_verify_result, missing);
    resolve(handle, "X509_VERIFY_PARAM_set1_ip_asc", api.param_set1_ip_asc, missing);
    resolve(handle, "X509_verify_cert_error_string", api.verify_cert_error_string, missing);
    resolve(handle, "ERR_get_error", api.err_get_error, missing);
    resolve(handle, "ERR_error_string_n", api.err_error_string_n, missing);
    resolve(handle, "ERR_clear_error", api.err_clear_error, missing);
    if (!missing.empty()) {
      load_error = std::string(k_libssl) + " lacks " + missing;
      return false;
    }
    return true;  // the handle stays open for the life of the process
  }();
  if (!loaded) {
    error = load_error;
    return nullptr;
  }
  return &api;
}

// OpenSSL's last queued error as text: "wrong version number", "certificate verify failed".
std::string last_error(const Api& api) {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = api.err_get_error()) != 0) {
    last = code;
  }
  if (last == 0) {
    return "TLS error";
  }
  char text[256];
  api.err_error_string_n(last, text, sizeof text);
  // "error:0A00010B:SSL routines::wrong version number": the words are last.
  std::string reason = text;
  if (const auto colon = reason.rfind(':'); colon != std::string::npos) {
    reason.erase(0, colon + 1);
  }
  return reason;
}

bool is_ip_address(const std::string& host) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address) == 1;
}

// SIGPIPE: OpenSSL writes with write(2), and a write into a socket the server
// closed raises SIGPIPE, whose default action would kill nxlock. Ignoring it
// process-wide would be inherited by run-locked's child; a custom BIO whose
// write uses MSG_NOSIGNAL would need another eight OpenSSL entry points and a
// re-implementation of the socket BIO's retry flags. So around each OpenSSL
// call this thread blocks SIGPIPE, and drops one that the call raised
// (sigtimedwait with a zero timeout) before unblocking: the error comes back
// as EPIPE, and nothing outlives the call.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&m_pipe);
    sigaddset(&m_pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &m_pipe, &m_old);
    sigset_t pending;
    sigpending(&pending);
    m_was_pending = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeGuard() {
    if (!m_was_pending) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&m_pipe, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &m_old, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t m_pipe;
  sigset_t m_old;
  bool m_was_pending = false;
};

}  // namespace

class TlsContext {
 public:
  TlsContext(const Api& api, SSL_CTX* context, TlsConfig config)
      : m_api(api), m_context(context), m_config(std::move(config)) {}
  ~TlsContext() { m_api.ctx_free(m_context); }
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  const Api& api() const { return m_api; }
  SSL_CTX* get() const { return m_context; }
  const TlsConfig& config() const { return m_config; }

 private:
  const Api& m_api;
  SSL_CTX* m_context;
  TlsConfig m_config;
};

std::shared_ptr<TlsContext> make_tls_context(const TlsConfig& config, const std::string& name) {
  std::string error;
  const Api* api = load_api(error);
  if (api == nullptr) {
    throw Error(ErrorKind::unavailable, name, error);
  }
  api->err_clear_error();
  SSL_CTX* raw = api->ctx_new(api->tls_client_method());
  if (raw == nullptr) {
    throw Error(ErrorKind::internal, name, "cannot create a TLS context: " + last_error(*api));
  }
  auto context = std::make_shared<TlsContext>(*api, raw, config);
  // SSL_write may be retried from a moved buffer (ours is a std::string), and
  // returns only when all of it is written (no partial writes to track).
  api->ctx_ctrl(raw, SSL_CTRL_MODE, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, nullptr);
  if (config.insecure) {
    api->ctx_set_verify(raw, SSL_VERIFY_NONE, nullptr);
  } else {
    api->ctx_set_verify(raw, SSL_VERIFY_PEER, nullptr);
    if (!config.cacert.empty() || !config.cacertdir.empty()) {
      if (api->ctx_load_verify_locations(
              raw, config.cacert.empty() ? nullptr : config.cacert.c_str(),
              config.cacertdir.empty() ? nullptr : config.cacertdir.c_str()) != 1) {
        const std::string what = !config.cacert.empty()
                                     ? "--cacert '" + util::escape(config.cacert) + "'"
                                     : "--cacertdir '" + util::escape(config.cacertdir) + "'";
        throw Error(ErrorKind::usage, what, "cannot load CA certificates: " + last_error(*api));
      }
    } else if (api->ctx_set_default_verify_paths(raw) != 1) {
      throw Error(ErrorKind::unavailable, name,
                  "cannot load the system's CA certificates: " + last_error(*api));
    }
  }
  if (!config.cert.empty() || !config.key.empty()) {
    if (config.cert.empty() || config.key.empty()) {
      throw Error(ErrorKind::usage, name, "--cert and --key go together");
    }
    if (api->ctx_use_certificate_chain_file(raw, config.cert.c_str()) != 1) {
      throw Error(ErrorKind::usage, "--cert '" + util::escape(config.cert) + "'", last_error(*api));
    }
    if (api->ctx_use_private_key_file(raw, config.key.c_str(), SSL_FILETYPE_PEM) != 1) {
      throw Error(ErrorKind::usage, "--key '" + util::escape(config.key) + "'", last_error(*api));
    }
    if (api->ctx_check_private_key(raw) != 1) {
      throw Error(ErrorKind::usage, "--key '" + util::escape(config.key) + "'",
                  "does not match --cert: " + last_error(*api));
    }
  }
  return context;
}

TlsSession::TlsSession(std::shared_ptr<TlsContext> context, int fd, const std::string& host)
    : m_context(std::move(context)) {
  const Api& api = m_context->api();
  const TlsConfig& config = m_context->config();
  api.err_clear_error();
  SSL* ssl = api.ssl_new(m_context->get());
  if (ssl == nullptr || api.set_fd(ssl, fd) != 1) {
    if (ssl != nullptr) {
      api.ssl_free(ssl);
    }
    throw Error(ErrorKind::internal, util::escape(host), "cannot start TLS: " + last_error(api));
  }
  m_ssl = ssl;
  const std::string& name = config.sni.empty() ? host : config.sni;
  const bool ip = is_ip_address(name);
  // SNI carries host names only (RFC 6066); an IP is checked, not sent.
  if (!ip) {
    api.ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(name.c_str()));
  }
  if (!config.insecure) {
    const int ok = ip ? api.param_set1_ip_asc(api.get0_param(ssl), name.c_str())
                      : api.set1_host(ssl, name.c_str());
    if (ok != 1) {
      throw Error(ErrorKind::usage, name, "cannot check this name: " + last_error(api));
    }
  }
}

TlsSession::~TlsSession() {
  if (m_ssl != nullptr) {
    // No close_notify: the server may be gone, and Redis needs none.
    m_context->api().ssl_free(static_cast<SSL*>(m_ssl));
  }
}

IoResult TlsSession::handshake() {
  const SigpipeGuard guard;
  m_context->api().err_clear_error();
  return result_of(m_context->api().connect(static_cast<SSL*>(m_ssl)), "handshake");
}

IoResult TlsSession::read(char* buffer, std::size_t size) {
  const SigpipeGuard guard;  // reading may write too (a key update's answer)
  m_context->api().err_clear_error();
  return result_of(m_context->api().read(static_cast<SSL*>(m_ssl), buffer, static_cast<int>(size)),
                   "read");
}

IoResult TlsSession::write(const char* buffer, std::size_t size) {
  const SigpipeGuard guard;
  m_context->api().err_clear_error();
  return result_of(m_context->api().write(static_cast<SSL*>(m_ssl), buffer, static_cast<int>(size)),
                   "write");
}

bool TlsSession::pending() const {
  return m_context->api().pending(static_cast<SSL*>(m_ssl)) > 0;
}

bool TlsSession::idle_alive() {
  // TLS 1.3 servers send session tickets after the handshake: records that
  // make the socket readable but hold no reply. Reading consumes them.
  char byte = 0;
  return read(&byte, 1).status == IoStatus::want_read;
}

IoResult TlsSession::explain(const IoResult& result) {
  if (result.kind != ErrorKind::permission) {
    // A TLS 1.3 server judges our certificate after our side of the handshake
    // is done, then closes: its alert may still be readable, and says why.
    char byte = 0;
    IoResult alert = read(&byte, 1);
    if (alert.status == IoStatus::failed && alert.kind == ErrorKind::permission) {
      return alert;
    }
  }
  return result;
}

IoResult TlsSession::result_of(int ret, const char* step) {
  if (ret > 0) {
    return {IoStatus::done, static_cast<std::size_t>(ret), {}};
  }
  const Api& api = m_context->api();
  SSL* ssl = static_cast<SSL*>(m_ssl);
  const int saved_errno = errno;
  switch (api.get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
      return {IoStatus::want_read, 0, {}};
    case SSL_ERROR_WANT_WRITE:
      return {IoStatus::want_write, 0, {}};
    case SSL_ERROR_ZERO_RETURN:
      return {IoStatus::closed, 0, {}};
    case SSL_ERROR_SYSCALL:
      if (saved_errno == 0 || saved_errno == EPIPE || saved_errno == ECONNRESET) {
        return {IoStatus::closed, 0, {}};  // EOF without close_notify
      }
      return {IoStatus::failed, 0, std::string("TLS ") + step + ": " + std::strerror(saved_errno)};
    default:
      break;
  }
  const long verify = api.get_verify_result(ssl);
  if (std::strcmp(step, "handshake") == 0 && verify != X509_V_OK) {
    return {
        IoStatus::failed, 0,
        std::string("TLS certificate verification failed: ") + api.verify_cert_error_string(verify),
        ErrorKind::permission};
  }
  const std::string reason = last_error(api);
  // TLS 1.3 servers judge our certificate after our handshake has finished:
  // their verdict arrives as an alert on the first read.
  if (reason.find("certificate required") != std::string::npos) {
    return {IoStatus::failed, 0,
            "the server requires a TLS client certificate (--cert and --key): " + reason,
            ErrorKind::permission};
  }
  if (reason.find("alert bad certificate") != std::string::npos ||
      reason.find("alert unknown ca") != std::string::npos ||
      reason.find("alert certificate unknown") != std::string::npos) {
    return {IoStatus::failed, 0, "the server refused the TLS client certificate: " + reason,
            ErrorKind::permission};
  }
  return {IoStatus::failed, 0, std::string("TLS ") + step + " failed: " + reason};
}

}  // namespace nxlock::store::net
