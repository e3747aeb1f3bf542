// Diagnosis: the verdicts, and the backend's diagnosis picked by the URL's scheme.
#include "store/diagnosis.hpp"

#include <algorithm>

namespace nxlock::store {

Check Check::ok(std::string name, std::string detail) {
  return {std::move(name), Verdict::ok, std::move(detail), {}, std::nullopt};
}

Check Check::warn(std::string name, std::string detail, std::string advice) {
  return {std::move(name), Verdict::warn, std::move(detail), std::move(advice), std::nullopt};
}

Check Check::fail(std::string name, std::string detail, std::string advice) {
  return {std::move(name), Verdict::fail, std::move(detail), std::move(advice), std::nullopt};
}

Check Check::skip(std::string name, std::string why) {
  return {std::move(name), Verdict::skip, std::move(why), {}, std::nullopt};
}

Check Check::stopping(util::ErrorKind kind, std::string name, std::string detail,
                      std::string advice) {
  return {std::move(name), Verdict::fail, std::move(detail), std::move(advice), kind};
}

bool Diagnosis::fit() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const Check& check) { return check.verdict == Check::Verdict::fail; });
}

const Check* Diagnosis::stopped() const {
  const auto found = std::find_if(checks.begin(), checks.end(),
                                  [](const Check& check) { return check.stop.has_value(); });
  return found == checks.end() ? nullptr : &*found;
}

std::string_view verdict_name(Check::Verdict verdict) {
  switch (verdict) {
    case Check::Verdict::ok:
      return "ok";
    case Check::Verdict::warn:
      return "warn";
    case Check::Verdict::skip:
      return "skip";
    case Check::Verdict::fail:
      break;
  }
  return "fail";
}

Diagnosis diagnose(const Url& url, const ConnectOptions& options) {
  if (url.scheme == Url::Scheme::file) {
    return diagnose_file(url);
  }
  if (url.scheme == Url::Scheme::etcd) {
    return diagnose_etcd(url, options);
  }
  return diagnose_redis(url, options);
}

}  // namespace nxlock::store
