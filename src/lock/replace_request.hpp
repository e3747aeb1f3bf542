// ReplaceRequests: run-locked --replace's request that a lock's holder stop
// its job, kept beside the lock (store::replace_key) until it expires.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lock/clock.hpp"
#include "store/store.hpp"

namespace nxlock::lock {

// Who asks: the replacer's process and a random id, and until when the
// request stands (Unix seconds on the lock's clock). One JSON object.
struct ReplaceRequest {
  std::string id;  // 16 hex digits: two replacers of one pid and host are told apart
  std::int64_t pid = 0;
  std::string host;
  std::int64_t expires = 0;

  // "pid 123 on host" for messages.
  std::string who() const;
  std::string to_json() const;
  static std::optional<ReplaceRequest> from_json(std::string_view text);
};

// The request key of one lock, on one store. The replacer posts (first wins)
// and withdraws; the holder looks for a live request at each renewal and
// whenever its watch wakes (docs/DESIGN.md, "Replacing a run").
class ReplaceRequests {
 public:
  ReplaceRequests(store::Store& store, Clock& clock, std::string key);

  // A request of this process, standing `seconds` from now.
  ReplaceRequest make(std::int64_t seconds);

  // Posts `mine` unless another live request stands: then returns that one
  // (the first replacer wins). A request that has expired is taken over. The
  // key is kept until the request's expiry (StepPolicy), so a replacer that
  // died leaves nothing behind.
  std::optional<ReplaceRequest> post(const ReplaceRequest& mine);

  // Deletes `mine` if it still stands (a replacer that took the lock or gave
  // up). Failures are traced, never thrown: the request expires by itself.
  void withdraw(const ReplaceRequest& mine) noexcept;

  // The live request, if one stands.
  std::optional<ReplaceRequest> pending();

  // A watch on the request key (Store::watch), armed when it returns.
  std::unique_ptr<store::Watcher> watch();

 private:
  store::Store& m_store;
  Clock& m_clock;
  std::string m_key;  // the request key
};

}  // namespace nxlock::lock
