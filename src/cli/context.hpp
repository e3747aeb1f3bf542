// Context: the global options, the output, and the backend a command works on.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/output.hpp"
#include "store/store.hpp"

namespace nxlock::cli {

struct GlobalOptions {
  std::string url;                     // empty: the embedded store at its default path
  std::string password_file;           // Redis password, kept out of `ps`
  double timeout = 2.0;                // Redis connect and per-command timeout, seconds
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
  bool quiet = false;
  bool verbose = false;
};

class Context {
 public:
  GlobalOptions globals;
  Output out;
  // run-locked: the child's command line, everything after KEY.
  std::vector<std::string> child_command;

  // The backend, opened on first use so --help and usage errors touch nothing.
  store::Store& store();

  // The store key for a user's KEY: the prefix plus the key. Throws usage (64)
  // for the empty key: in a script it is almost always an unset variable.
  std::string key(std::string_view user_key) const;

  // `text` (a command line to store or show) with every secret this invocation
  // knows (URL, file and environment passwords) and every password-like
  // pattern replaced by "***".
  std::string redact(std::string_view text) const;

 private:
  std::unique_ptr<store::Store> m_store;
  std::vector<std::string> m_secrets;  // the passwords store() was given
};

}  // namespace nxlock::cli
