// Holder: advisory details about who holds a lock.
#include "lock/holder.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

std::string Holder::to_json() const {
  nlohmann::json j = {{"value", value},
                      {"host", host},
                      {"pid", pid},
                      {"command", command},
                      {"acquired_at", acquired_at}};
  if (finished_at != 0) {
    j["finished_at"] = finished_at;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Holder> Holder::from_json(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("value") || !j["value"].is_string()) {
    return std::nullopt;
  }
  Holder h;
  h.value = j["value"].get<std::string>();
  h.host = j.value("host", "");
  h.pid = j.value("pid", std::int64_t{0});
  h.command = j.value("command", "");
  h.acquired_at = j.value("acquired_at", std::int64_t{0});
  h.finished_at = j.value("finished_at", std::int64_t{0});
  return h;
}

std::string holder_key(std::string_view key) { return std::string(key) + ":holder"; }

Holder describe_holder(std::string value, std::int64_t pid, std::string command,
                       std::int64_t acquired_at) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return Holder{std::move(value), host, pid, std::move(command), acquired_at};
}

void record_holder(store::Store& store, std::string_view key, const Holder& holder) {
  try {
    store.set(holder_key(key), holder.to_json());
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not recorded: ") + e.what());
  }
}

std::optional<Holder> read_holder(store::Store& store, std::string_view key,
                                  std::string_view value) {
  try {
    const auto text = store.get(holder_key(key));
    if (!text) {
      return std::nullopt;
    }
    auto holder = Holder::from_json(*text);
    if (!holder || holder->value != value) {
      return std::nullopt;
    }
    return holder;
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not read: ") + e.what());
    return std::nullopt;
  }
}

void forget_holder(store::Store& store, std::string_view key, std::string_view value) {
  try {
    const auto k = holder_key(key);
    const auto text = store.get(k);
    if (!text) {
      return;
    }
    const auto holder = Holder::from_json(*text);
    if (holder && holder->value == value) {
      // Compare-and-delete on the exact text we read: a newer holder's record survives.
      store.compare_and_delete(k, *text);
    }
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not removed: ") + e.what());
  }
}

}  // namespace nxlock::lock
