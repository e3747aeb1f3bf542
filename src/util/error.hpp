// Error: the one exception type that carries an outcome class up to main.
#pragma once

#include <stdexcept>
#include <string>

namespace nxlock::util {

// What went wrong, in sysexits(3) terms; the CLI maps each to an exit status.
enum class ErrorKind {
  usage,        // bad option, bad URL, empty key (EX_USAGE)
  data,         // corrupt store, non-timestamp lock value, WRONGTYPE (EX_DATAERR)
  unavailable,  // backend refused, timed out or went away (EX_UNAVAILABLE)
  internal,     // a bug or an unexpected system failure (EX_SOFTWARE)
  permission,   // authentication failed, store not accessible (EX_NOPERM)
  config,       // the backend is set up so that it cannot keep a lock (EX_CONFIG)
};

// Thrown for every failure a user should see as `nxlock: <what>: <why>`.
// `what` names the key, path or URL involved (with secrets already redacted).
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string what, std::string why)
      : std::runtime_error(what + ": " + why),
        m_kind(kind),
        m_what(std::move(what)),
        m_why(std::move(why)) {}

  ErrorKind kind() const { return m_kind; }
  const std::string& subject() const { return m_what; }
  const std::string& reason() const { return m_why; }

 private:
  ErrorKind m_kind;
  std::string m_what;
  std::string m_why;
};

}  // namespace nxlock::util
