// Redaction of secrets in command lines that are stored or shown (holder details).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nxlock::util {

// The placeholder every secret is replaced with.
inline constexpr std::string_view k_redacted = "***";

// `text` with what looks like a secret replaced by k_redacted: the password of
// every URL (scheme://[user]:PASSWORD@host), the value of NAME=VALUE and of
// --NAME VALUE / --NAME=VALUE when NAME mentions a password, secret, token or
// auth (NXLOCK_PASSWORD=..., REDISCLI_AUTH=..., --password ...), and every
// occurrence of a `known` secret (those of 4 bytes or more: shorter ones would
// blank out ordinary words; the patterns above still apply to them).
std::string redact_secrets(std::string_view text, const std::vector<std::string>& known = {});

}  // namespace nxlock::util
