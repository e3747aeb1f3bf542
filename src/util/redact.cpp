// Redaction of secrets in command lines: URL passwords, password-like options and variables.
#include "util/redact.hpp"

#include <algorithm>
#include <cctype>

namespace nxlock::util {

namespace {

constexpr std::size_t k_min_known_length = 4;

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// Where a shell word that starts at `at` ends (a space, or the end).
std::size_t word_end(std::string_view text, std::size_t at) {
  while (at < text.size() && !is_space(text[at])) {
    ++at;
  }
  return at;
}

bool names_a_secret(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // "--password-file FILE" names where a secret is, not the secret itself.
  if (lower.ends_with("file")) {
    return false;
  }
  for (const char* word : {"pass", "secret", "token", "auth"}) {
    if (lower.find(word) != std::string::npos) {
      return true;
    }
  }
  return false;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

// Marks bytes [from, to) as secret.
void mark(std::vector<bool>& secret, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i) {
    secret[i] = true;
  }
}

void mark_url_passwords(std::string_view text, std::vector<bool>& secret) {
  for (std::size_t scheme = text.find("://"); scheme != std::string_view::npos;
       scheme = text.find("://", scheme + 3)) {
    const std::size_t start = scheme + 3;
    // The authority ends at a space or the path; the password may hold '@'.
    std::size_t end = start;
    while (end < text.size() && !is_space(text[end]) && text[end] != '/') {
      ++end;
    }
    const std::size_t at = text.substr(start, end - start).rfind('@');
    if (at == std::string_view::npos) {
      continue;
    }
    const std::size_t colon = text.substr(start, at).find(':');
    if (colon != std::string_view::npos) {
      mark(secret, start + colon + 1, start + at);
    }
  }
}

void mark_named_values(std::string_view text, std::vector<bool>& secret) {
  // NAME=VALUE (an environment assignment, --name=value): anywhere in a word.
  for (std::size_t eq = text.find('='); eq != std::string_view::npos; eq = text.find('=', eq + 1)) {
    std::size_t name = eq;
    while (name > 0 && is_name_char(text[name - 1])) {
      --name;
    }
    if (names_a_secret(text.substr(name, eq - name))) {
      mark(secret, eq + 1, word_end(text, eq + 1));
    }
  }
  // --name VALUE: the next word.
  for (std::size_t at = 0; at < text.size();) {
    while (at < text.size() && is_space(text[at])) {
      ++at;
    }
    const std::size_t end = word_end(text, at);
    const std::string_view word = text.substr(at, end - at);
    if (word.starts_with("--") && word.find('=') == std::string_view::npos &&
        names_a_secret(word.substr(2))) {
      std::size_t next = end;
      while (next < text.size() && is_space(text[next])) {
        ++next;
      }
      mark(secret, next, word_end(text, next));
    }
    at = end;
  }
}

}  // namespace

std::string redact_secrets(std::string_view text, const std::vector<std::string>& known) {
  std::vector<bool> secret(text.size(), false);
  mark_url_passwords(text, secret);
  mark_named_values(text, secret);
  for (const auto& word : known) {
    if (word.size() < k_min_known_length) {
      continue;
    }
    for (std::size_t at = text.find(word); at != std::string_view::npos;
         at = text.find(word, at + 1)) {
      mark(secret, at, at + word.size());
    }
  }
  // Each run of secret bytes becomes one placeholder.
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!secret[i]) {
      out += text[i];
    } else if (i == 0 || !secret[i - 1]) {
      out += k_redacted;
    }
  }
  return out;
}

}  // namespace nxlock::util
