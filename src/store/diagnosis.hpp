// Diagnosis: whether a backend is fit for locks, one check at a time (`nxlock doctor`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/connect_options.hpp"
#include "store/url.hpp"
#include "util/error.hpp"

namespace nxlock::store {

struct Check {
  // skip: the check could not be made (`detail` says why); it neither passes nor fails.
  enum class Verdict { ok, warn, fail, skip };

  std::string name;  // what was checked: "server version", "free space"
  Verdict verdict = Verdict::ok;
  std::string detail;  // what was found: "7.0.15", "12 GiB"
  std::string advice;  // what to do about a warn or a fail; empty for ok
  // A fail that stopped the diagnosis: the backend could not be reached
  // (unavailable) or refused us (permission). Unset for any other verdict.
  std::optional<util::ErrorKind> stop;

  static Check ok(std::string name, std::string detail);
  static Check warn(std::string name, std::string detail, std::string advice);
  static Check fail(std::string name, std::string detail, std::string advice);
  static Check skip(std::string name, std::string why);
  // A fail that stops the diagnosis: nothing further can be checked.
  static Check stopping(util::ErrorKind kind, std::string name, std::string detail,
                        std::string advice);
};

struct Diagnosis {
  std::string backend;  // the redacted URL, or the store's path
  std::vector<Check> checks;

  // No check failed.
  bool fit() const;
  // The fail that stopped the diagnosis, if one did.
  const Check* stopped() const;
};

// "ok", "warn", "fail", "skip".
std::string_view verdict_name(Check::Verdict verdict);

// Checks the backend `url` names, reading only: nothing is written to it and
// an embedded store that does not exist is not created. Problems are checks
// that fail, not exceptions; throws util::Error only for what stops before any
// check (a TLS file that cannot be read: usage).
Diagnosis diagnose(const Url& url, const ConnectOptions& options);

// The two backends' diagnoses (diagnose() picks one by the URL's scheme).
Diagnosis diagnose_redis(const Url& url, const ConnectOptions& options);
Diagnosis diagnose_file(const Url& url);
Diagnosis diagnose_etcd(const Url& url, const ConnectOptions& options);

// A file system, as statfs(2)'s f_type names it.
struct FileSystemKind {
  std::string name;      // "ext4", "nfs", or "0x…" when unknown
  bool network = false;  // shared over a network: flock and rename may not be atomic there
};
FileSystemKind classify_file_system(long long magic);

}  // namespace nxlock::store
