// LockSpace: where the locks live (one store, a quorum of servers, or etcd),
// opened once from the URLs: the locks of each kind it offers, the lock a
// printed value belongs to, the clock its decisions use, and its list.
//
// cli/ asks this seam and never a backend; a new deployment is one more
// implementation, chosen in open_lock_space() (docs/DESIGN.md, "Adding a backend").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lock/clock.hpp"
#include "lock/list_locks.hpp"
#include "lock/lockable.hpp"
#include "lock/replace_request.hpp"
#include "store/connect_options.hpp"
#include "store/url.hpp"

namespace nxlock::lock {

// The kinds of hold a lock may be taken as.
enum class LockKind {
  exclusive,
  shared,  // --shared: any number of shared holders at once
  slots,   // --slots N: at most N holders at once, each in a slot
};

// `list`'s rows, read at one instant of the clock they are judged by.
struct LockList {
  std::vector<LockRow> rows;
  std::int64_t now = 0;     // Unix seconds
  std::size_t servers = 1;  // a quorum's: how many servers were asked
};

// The lock a value given to `unlock` or `renew` names (lock_for_value), and
// the value as that lock takes it (a slot's EXPIRY without its SLOT:).
struct ValueHold {
  std::unique_ptr<Lockable> lock;
  std::string value;
};

class LockSpace {
 public:
  virtual ~LockSpace() = default;

  // The clock lock decisions use: the backend's, unless `local` is asked
  // (--clock local) or the space has none that all its servers share.
  virtual std::unique_ptr<Clock> clock(bool local) = 0;

  // The lock KEY (the full key) as an exclusive or a shared holder. Throws
  // util::Error(usage) for a kind this space does not offer (refuse()).
  std::unique_ptr<Lockable> lock(Clock& clock, std::string key, LockKind kind);

  // A slot holder of the counting semaphore KEY of `slots` slots (1..k_max_slots).
  // Throws util::Error(usage) for a bad count, or where slots are not offered.
  std::unique_ptr<SlotLock> slots(Clock& clock, std::string key, int slots);

  // The hold that `unlock` and `renew` act on: the kind `printed` names by
  // its form, as `lock` printed it (SLOT:EXPIRY, EXPIRY:ID, EXPIRY); `slots`
  // (--slots N, or 0) only bounds a slot's number. Throws usage (64) for a
  // value of no form, or against --slots.
  ValueHold lock_for_value(Clock& clock, std::string key, int slots, const std::string& printed);

  // run-locked --replace's requests beside the lock KEY (the full key), read
  // by `clock` (replace_request.hpp). Throws util::Error(usage) naming
  // --replace where this space does not offer them (replace_refusal()).
  std::unique_ptr<ReplaceRequests> replace_requests(Clock& clock, std::string key);

  // The locks whose keys (prefix included) match the glob `pattern`, with the
  // expired ones when `with_expired`.
  virtual LockList list(std::string_view pattern, bool with_expired) = 0;

 protected:
  // Why this space does not offer `kind`, in a few words for the user
  // ("not available with a quorum of servers; use one server"); empty if it does.
  virtual std::string refusal(LockKind kind) const = 0;
  // A lock of an offered kind; exclusive or shared.
  virtual std::unique_ptr<Lockable> make_lock(Clock& clock, std::string key, LockKind kind) = 0;
  // A slot lock, where slots are offered (a space that refuses them need not say how).
  virtual std::unique_ptr<SlotLock> make_slots(Clock& clock, std::string key, int slots);
  // Why this space does not offer --replace, and what is left to build for
  // it; empty if it does (then make_replace_requests() makes them).
  virtual std::string replace_refusal() const;
  virtual std::unique_ptr<ReplaceRequests> make_replace_requests(Clock& clock, std::string key);

 private:
  // Throws util::Error(usage) naming the option of `kind` when refusal() says why.
  void refuse(LockKind kind) const;
};

// One server (or deployment) a URL names, and how to reach it.
struct Place {
  std::string given;  // the URL as the user gave it (may hold a password: never shown)
  store::Url url;
  store::ConnectOptions options;
};

// Where the locks live for these places: one (the embedded store, a Redis
// deployment, etcd) or a quorum of several. Throws util::Error(usage) for a
// place given twice, or for etcd among several (it is a quorum already).
// Connects lazily where the backend does.
std::unique_ptr<LockSpace> open_lock_space(std::vector<Place> places);

}  // namespace nxlock::lock
