// Context: the global options, the output, and the backend a command works on.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/output.hpp"
#include "lock/lock_space.hpp"
#include "store/make_store.hpp"
#include "store/store.hpp"
#include "util/error.hpp"

namespace nxlock::cli {

struct GlobalOptions {
  // Each -u (NXLOCK_URL), as given: none means the embedded store at its default
  // path; several (or one listing several, whitespace-separated) mean a quorum.
  std::vector<std::string> urls;
  std::string password_file;           // Redis password, kept out of `ps`
  double io_timeout = 2.0;             // --io-timeout: the backend's connect and per-command timeout
  double deprecated_timeout = -1;      // --timeout, its old name; negative: not given
  std::string prefix;                  // prepended to every key
  std::string cacert;                  // rediss://: CA bundle (default: the system's CAs)
  std::string cacertdir;               // rediss://: hashed CA directory
  std::string cert;                    // rediss://: client certificate
  std::string key;                     // rediss://: its private key
  std::string sni;                     // rediss://: the server name to send and check
  bool insecure = false;               // rediss://: skip verification
  std::string sentinel_password_file;  // redis+sentinel://: the Sentinels' own password
  int replicas = 0;                    // lock writes wait until this many replicas have them
  bool json = false;
  int json_fd = -1;  // --json-fd: the descriptor for the JSON object; negative: stdout
  bool quiet = false;
  bool verbose = false;
};

class Context {
 public:
  GlobalOptions globals;
  Output out;
  // run-locked: the child's command line, everything after KEY.
  std::vector<std::string> child_command;
  // The command takes locks (lock, run-locked, renew): set before the backend
  // is opened, it refuses a Redis that may evict them (exit 78).
  bool takes_locks = false;
  // The command keeps the locks it takes while it lives, renewing them
  // (run-locked without --no-renew): see ConnectOptions::renews_while_alive.
  bool renews_while_alive = false;

  // The backend, opened on first use so --help and usage errors touch nothing,
  // for the commands on one server's keys (setnx, get, getset, del). Throws
  // usage (64) when several URLs were given.
  store::Store& store();

  // Where the lock commands' locks live (one store, a quorum of the URLs
  // given, etcd), opened on first use. Throws usage (64) for a bad URL, one
  // given twice, or etcd among several.
  lock::LockSpace& locks();

  // The URLs given, each -u split at whitespace when every word is a URL
  // (NXLOCK_URL="redis://a redis://b redis://c"); empty for the embedded store.
  std::vector<std::string> url_list() const;

  // The store key for a user's KEY: the prefix plus the key. Throws usage (64)
  // for the empty key: in a script it is almost always an unset variable.
  std::string key(std::string_view user_key) const;

  // `text` (a command line to store or show) with every secret this invocation
  // knows (URL, file and environment passwords) and every password-like
  // pattern replaced by "***".
  std::string redact(std::string_view text) const;

  // `error` with the backend's advice for it: the embedded store's refusal
  // names the store and what to do, not the file that refused (access_advice.hpp).
  util::Error with_advice(const util::Error& error) const;

  // The backend's connections are not ours any more (run-locked's watchdog, a
  // fork that closed them): forgets it without closing what it held, which may
  // be someone else's descriptors now; the next use opens it anew.
  void forget_backend() {
    static_cast<void>(m_store.release());
    static_cast<void>(m_locks.release());
  }

  // Parses one URL (empty: the default store) and gathers its connect options.
  std::pair<store::Url, store::ConnectOptions> prepare(const std::string& url_text);

 private:
  std::unique_ptr<store::Store> m_store;
  std::unique_ptr<lock::LockSpace> m_locks;
  std::vector<std::string> m_secrets;  // the passwords store() was given
};

}  // namespace nxlock::cli
