// Holder: advisory details about who holds a lock.
#include "lock/holder.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "store/keys.hpp"
#include "util/error.hpp"
#include "util/process_identity.hpp"
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
  if (start != 0 && !boot.empty()) {
    j["start"] = start;
    j["boot"] = boot;
  }
  if (fence != 0) {
    j["fence"] = fence;
  }
  if (watchdog_pid != 0 && watchdog_start != 0) {
    j["watchdog"] = watchdog_pid;
    j["watchdog_start"] = watchdog_start;
  }
  if (replaceable) {
    j["replaceable"] = true;
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
  h.replaceable = j.contains("replaceable") && j["replaceable"].is_boolean() &&
                  j["replaceable"].get<bool>();
  if (j.contains("fence") && j["fence"].is_number_integer()) {
    h.fence = j["fence"].get<std::int64_t>();
  }
  if (j.contains("watchdog") && j["watchdog"].is_number_integer() &&
      j.contains("watchdog_start") && j["watchdog_start"].is_number_unsigned()) {
    h.watchdog_pid = j["watchdog"].get<std::int64_t>();
    h.watchdog_start = j["watchdog_start"].get<std::uint64_t>();
  }
  if (j.contains("start") && j["start"].is_number_unsigned() && j.contains("boot") &&
      j["boot"].is_string()) {
    h.start = j["start"].get<std::uint64_t>();
    h.boot = j["boot"].get<std::string>();
  }
  return h;
}

namespace {
std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}
}  // namespace

namespace {

// The process `pid` that started at `start` on boot `boot` of this host is
// known not to run (gone, or stopped); false when it cannot be known.
bool known_not_running(const Holder& holder, std::int64_t pid, std::uint64_t start) {
  if (start == 0 || holder.boot.empty() || holder.host != host_name()) {
    return false;
  }
  return !util::still_running({pid, start, holder.boot});
}

// ...and known to exist no more (not merely stopped).
bool known_dead(const Holder& holder, std::int64_t pid, std::uint64_t start) {
  if (!known_not_running(holder, pid, start)) {
    return false;
  }
  const auto now = util::identify_process(pid);
  return !now || now->start != start || now->boot != holder.boot;
}

}  // namespace

bool Holder::gone() const { return known_not_running(*this, pid, start) && !releasing(); }

bool Holder::releasing() const {
  return watchdog_pid != 0 && known_dead(*this, pid, start) &&
         util::still_running({watchdog_pid, watchdog_start, boot});
}

Holder describe_holder(std::string value, std::int64_t pid, std::string command,
                       std::int64_t acquired_at, std::int64_t watchdog_pid) {
  Holder holder;
  holder.value = std::move(value);
  holder.host = host_name();
  holder.pid = pid;
  if (command.size() > k_holder_command_bytes) {
    std::size_t cut = k_holder_command_bytes;
    while (cut > 0 && (static_cast<unsigned char>(command[cut]) & 0xC0) == 0x80) {
      --cut;  // not inside a UTF-8 sequence: the JSON record stays valid
    }
    command.resize(cut);
    command += "\u2026";
  }
  holder.command = std::move(command);
  holder.acquired_at = acquired_at;
  if (const auto process = util::identify_process(pid)) {
    holder.start = process->start;
    holder.boot = process->boot;
  }
  if (watchdog_pid > 0) {
    if (const auto watchdog = util::identify_process(watchdog_pid)) {
      holder.watchdog_pid = watchdog_pid;
      holder.watchdog_start = watchdog->start;
    }
  }
  return holder;
}

void write_holder(store::Store& store, std::string_view key, const Holder& holder,
                  util::Micros lifetime) {
  try {
    store.set(store::holder_key(key), holder.to_json(), {.lifetime = lifetime});
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not recorded: ") + e.what());
  }
}

std::optional<Holder> read_holder(store::Store& store, std::string_view key,
                                  std::string_view value) {
  try {
    const auto text = store.get(store::holder_key(key));
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
    const auto k = store::holder_key(key);
    const auto text = store.get(k);
    if (!text) {
      return;
    }
    const auto holder = Holder::from_json(*text);
    if (holder && holder->value == value) {
      // Compare-and-delete on the exact text we read: a newer holder's record survives.
      store.compare_and_delete(k, *text, std::nullopt, store::k_plain_step);
    }
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not removed: ") + e.what());
  }
}

void HolderBook::record(Holder holder, util::Micros lifetime) {
  write_holder(m_store, m_key, holder, lifetime);
  m_holder = std::move(holder);
}

void HolderBook::follow(std::string_view from, std::string_view to, util::Micros lifetime) {
  if (ours(from)) {
    Holder holder = *m_holder;
    holder.value = to;
    record(std::move(holder), lifetime);
  } else if (auto holder = read_holder(m_store, m_key, from)) {
    holder->value = to;
    write_holder(m_store, m_key, *holder, lifetime);
  }
}

void HolderBook::finish(std::string_view from, std::string_view to, std::int64_t finished_at,
                        util::Micros lifetime) {
  if (!ours(from)) {
    return;
  }
  // A compare-and-set on the exact record we wrote: should the hold already
  // have run out and a new holder have written its own, ours must not replace it.
  Holder holder = *m_holder;
  holder.value = to;
  holder.finished_at = finished_at;
  try {
    m_store.compare_and_set(store::holder_key(m_key), m_holder->to_json(), holder.to_json(),
                            std::nullopt, {.lifetime = lifetime});
    m_holder = std::move(holder);
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not updated: ") + e.what());
  }
}

void HolderBook::forget(std::string_view value) {
  if (!ours(value)) {
    forget_holder(m_store, m_key, value);
    return;
  }
  try {
    // Compare-and-delete on the exact record we wrote: a newer holder's survives.
    m_store.compare_and_delete(store::holder_key(m_key), m_holder->to_json(), std::nullopt,
                               store::k_plain_step);
  } catch (const util::Error& e) {
    util::trace(std::string("holder details not removed: ") + e.what());
  }
  m_holder.reset();
}

}  // namespace nxlock::lock
