// The backend's URLs as given, refused or named before any backend is opened: see url_checks.hpp.
#include "cli/url_checks.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "store/default_store.hpp"
#include "store/url.hpp"
#include "util/escape.hpp"
#include "util/redact.hpp"

namespace nxlock::cli {

namespace {

using util::Error;
using util::ErrorKind;

constexpr std::string_view k_blanks = " \t\n";
constexpr std::string_view k_unset = " (an unset variable in a script?)";

bool url_blank(std::string_view text) {
  return text.find_first_not_of(k_blanks) == std::string_view::npos;
}

// The items of a list of URLs ("$A $B $C"), empty ones kept: "redis://a  redis://c"
// has three, the second empty. Trailing newlines go (a file's last line ends in
// one); any other blank at either end or beside another makes an empty item.
std::vector<std::string_view> items_of(std::string_view text) {
  while (text.ends_with('\n')) {
    text.remove_suffix(1);
  }
  std::vector<std::string_view> items;
  std::size_t at = 0;
  while (true) {
    const std::size_t end = text.find_first_of(k_blanks, at);
    items.push_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) {
      return items;
    }
    at = end + 1;
  }
}

// Whether Context::url_list() reads `text` as a list: every word is a URL (a
// file:// path may hold a space).
bool is_list(std::string_view text) {
  const auto items = items_of(text);
  return std::all_of(items.begin(), items.end(), [](std::string_view item) {
    return item.empty() || item.find("://") != std::string_view::npos;
  });
}

std::string quoted_url(std::string_view text) {
  return "'" + util::escape(util::redact_secrets(text)) + "'";
}

// The empty item of the list `text`, if it has one.
std::optional<Error> empty_item(std::string_view text, const std::string& subject) {
  if (!is_list(text)) {
    return std::nullopt;
  }
  const auto items = items_of(text);
  const auto empty = std::find(items.begin(), items.end(), std::string_view());
  if (items.size() < 2 || empty == items.end()) {
    return std::nullopt;
  }
  return Error(ErrorKind::usage, subject + " " + quoted_url(text),
               "URL " + std::to_string(empty - items.begin() + 1) + " of " +
                   std::to_string(items.size()) + " is empty, which is refused" +
                   std::string(k_unset) + ": a quorum short of a server counts another majority");
}

}  // namespace

std::optional<Error> refuse_urls(const std::vector<std::string>& urls, const char* environment) {
  if (urls.empty()) {
    // CLI11 takes no value from a variable that is set but empty.
    if (environment != nullptr) {
      return Error(ErrorKind::usage, "NXLOCK_URL ''",
                   "set but empty, which is refused" + std::string(k_unset) +
                       ": unset it for the embedded store");
    }
    return std::nullopt;
  }
  const bool from_environment =
      environment != nullptr && urls.size() == 1 && urls.front() == environment;
  if (from_environment) {
    if (url_blank(urls.front())) {
      return Error(ErrorKind::usage, "NXLOCK_URL " + quoted_url(urls.front()),
                   "blank, which is refused" + std::string(k_unset) +
                       ": unset it for the embedded store");
    }
    return empty_item(urls.front(), "NXLOCK_URL");
  }
  for (std::size_t i = 0; i < urls.size(); ++i) {
    const std::string& url = urls[i];
    if (url_blank(url)) {
      if (urls.size() == 1) {
        return Error(ErrorKind::usage, "--url " + quoted_url(url),
                     "an empty URL is refused" + std::string(k_unset) +
                         ": leave -u out for NXLOCK_URL or the embedded store");
      }
      return Error(ErrorKind::usage, "--url " + quoted_url(url),
                   "-u " + std::to_string(i + 1) + " of " + std::to_string(urls.size()) +
                       " is empty, which is refused" + std::string(k_unset) +
                       ": a quorum short of a server counts another majority");
    }
    if (auto refused = empty_item(url, "--url")) {
      return refused;
    }
    if (url.find("://") == std::string::npos) {
      // `run-locked -u k true`: -u took the KEY, and the rest moved up one.
      return Error(ErrorKind::usage, "--url " + quoted_url(url),
                   "-u took " + quoted_url(url) +
                       " as its URL, and it has no scheme (redis://, file://, etcd://, ...); "
                       "-u URL names the backend: the KEY goes after the options");
    }
  }
  return std::nullopt;
}

std::string backend_summary(const std::vector<std::string>& url_list) {
  if (url_list.size() > 1) {
    std::string text = "a quorum of " + std::to_string(url_list.size()) +
                       " servers (a majority is " + std::to_string(url_list.size() / 2 + 1) + "):";
    for (const std::string& url : url_list) {
      text += " " + store::parse_url(url).redacted;
    }
    return text;
  }
  const store::Url url =
      url_list.empty() ? store::default_store_url() : store::parse_url(url_list.front());
  switch (url.scheme) {
    case store::Url::Scheme::file: {
      std::string text = "the embedded store " + util::escape(url.path);
      if (url.no_url) {
        text += url.is_default_store ? " (the default: no -u, NXLOCK_URL or NXLOCK_STORE)"
                                     : " (NXLOCK_STORE)";
      }
      return text;
    }
    case store::Url::Scheme::redis_tcp:
      return "Redis " + url.redacted;
    case store::Url::Scheme::redis_unix:
      return "Redis on the unix socket " + util::escape(url.path) + " (" + url.redacted + ")";
    case store::Url::Scheme::redis_sentinel:
      return "Redis master '" + util::escape(url.master) + "' through " +
             std::to_string(url.sentinels.size()) + " Sentinel(s) (" + url.redacted + ")";
    case store::Url::Scheme::etcd:
      return "etcd, " + std::to_string(url.seeds.size()) + " member(s) (" + url.redacted + ")";
  }
  return url.redacted;
}

}  // namespace nxlock::cli
