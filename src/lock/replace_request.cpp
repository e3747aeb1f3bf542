// ReplaceRequests: the --replace request beside a lock, posted, withdrawn and looked for.
#include "lock/replace_request.hpp"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "lock/holder.hpp"
#include "store/keys.hpp"
#include "util/error.hpp"
#include "util/random.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

std::string ReplaceRequest::who() const {
  return "pid " + std::to_string(pid) + (host.empty() ? "" : " on " + host);
}

std::string ReplaceRequest::to_json() const {
  const nlohmann::json j = {{"id", id}, {"pid", pid}, {"host", host}, {"expires", expires}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<ReplaceRequest> ReplaceRequest::from_json(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("expires") ||
      !j["expires"].is_number_integer()) {
    return std::nullopt;
  }
  ReplaceRequest r;
  r.id = j["id"].get<std::string>();
  r.expires = j["expires"].get<std::int64_t>();
  r.pid = j.value("pid", std::int64_t{0});
  r.host = j.value("host", "");
  return r;
}

ReplaceRequests::ReplaceRequests(store::Store& store, Clock& clock, std::string key)
    : m_store(store), m_clock(clock), m_key(store::replace_key(key)) {}

ReplaceRequest ReplaceRequests::make(std::int64_t seconds) {
  ReplaceRequest r;
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(util::random_u64()));
  r.id = id;
  r.pid = getpid();
  r.host = describe_holder("", 0, "", 0).host;
  r.expires = util::whole_seconds(m_clock.now()) + seconds;
  return r;
}

std::optional<ReplaceRequest> ReplaceRequests::post(const ReplaceRequest& mine) {
  const std::int64_t now = util::whole_seconds(m_clock.now());
  store::StepPolicy policy;
  policy.lifetime = util::Micros((mine.expires - now + 1) * 1'000'000);
  const std::string value = mine.to_json();
  // Twice at most: once more after taking away an expired (or unreadable) request.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (m_store.set_if_absent(m_key, value, std::nullopt, policy)) {
      m_store.wake(m_key);
      return std::nullopt;
    }
    const auto current = m_store.get(m_key);
    if (!current) {
      continue;  // withdrawn meanwhile
    }
    const auto other = ReplaceRequest::from_json(*current);
    if (other && other->expires >= now) {
      return other;
    }
    m_store.compare_and_delete(m_key, *current, std::nullopt, store::k_plain_step);
  }
  // Lost to a third replacer at each step: it is first.
  const auto current = m_store.get(m_key);
  auto other = current ? ReplaceRequest::from_json(*current) : std::nullopt;
  if (!other) {
    throw util::Error(util::ErrorKind::unavailable, "--replace",
                      "the request could not be posted: another replacer keeps changing it");
  }
  return other;
}

void ReplaceRequests::withdraw(const ReplaceRequest& mine) noexcept {
  try {
    m_store.compare_and_delete(m_key, mine.to_json(), std::nullopt, store::k_plain_step);
  } catch (const std::exception& e) {
    util::trace(std::string("--replace: request not withdrawn (it expires by itself): ") +
                e.what());
  }
}

std::optional<ReplaceRequest> ReplaceRequests::pending() {
  const auto current = m_store.get(m_key);
  if (!current) {
    return std::nullopt;
  }
  auto request = ReplaceRequest::from_json(*current);
  if (!request || request->expires < util::whole_seconds(m_clock.now())) {
    return std::nullopt;
  }
  return request;
}

std::unique_ptr<store::Watcher> ReplaceRequests::watch() {
  return m_store.watch(m_key);
}

}  // namespace nxlock::lock
