// LockSpace: the steps every space shares (refusals, a value's lock), and
// open_lock_space(), the one place that knows every deployment.
#include "lock/lock_space.hpp"

#include <algorithm>
#include <utility>

#include "lock/lease_lock.hpp"
#include "lock/lock_spaces.hpp"
#include "util/error.hpp"
#include "util/redact.hpp"

namespace nxlock::lock {

using util::Error;
using util::ErrorKind;

void LockSpace::refuse(LockKind kind) const {
  const std::string why = refusal(kind);
  if (!why.empty()) {
    throw Error(ErrorKind::usage, kind == LockKind::slots ? "--slots" : "--shared", why);
  }
}

std::unique_ptr<Lockable> LockSpace::lock(Clock& clock, std::string key, LockKind kind) {
  if (kind == LockKind::slots) {
    throw Error(ErrorKind::internal, "lock", "a lock of slots comes from slots()");
  }
  refuse(kind);
  return make_lock(clock, std::move(key), kind);
}

std::unique_ptr<SlotLock> LockSpace::slots(Clock& clock, std::string key, int slots) {
  refuse(LockKind::slots);
  if (slots < 1 || slots > k_max_slots) {
    throw Error(ErrorKind::usage, "--slots", "must be 1 to " + std::to_string(k_max_slots));
  }
  return make_slots(clock, std::move(key), slots);
}

std::unique_ptr<SlotLock> LockSpace::make_slots(Clock&, std::string, int) {
  throw Error(ErrorKind::internal, "--slots", "offered, but not made");
}

std::string LockSpace::replace_refusal() const {
  return "not available with this backend";
}

std::unique_ptr<ReplaceRequests> LockSpace::make_replace_requests(Clock&, std::string) {
  throw Error(ErrorKind::internal, "--replace", "offered, but not made");
}

std::unique_ptr<ReplaceRequests> LockSpace::replace_requests(Clock& clock, std::string key) {
  const std::string why = replace_refusal();
  if (!why.empty()) {
    throw Error(ErrorKind::usage, "--replace", why);
  }
  return make_replace_requests(clock, std::move(key));
}

ValueHold LockSpace::lock_for_value(Clock& clock, std::string key, int slots,
                                    const std::string& printed) {
  const ValueForm form = value_form(printed);
  if (slots > 0 || form == ValueForm::slot) {
    // A slot's value names its slot; --slots N, when given, only bounds it.
    auto semaphore = this->slots(clock, std::move(key), slots > 0 ? slots : k_max_slots);
    const auto parsed = parse_slot_value(semaphore->key(), printed, semaphore->slots());
    semaphore->use_slot(parsed.slot);
    return {std::move(semaphore), parsed.value};
  }
  return {lock(clock, std::move(key), form == ValueForm::shared ? LockKind::shared
                                                                 : LockKind::exclusive),
          printed};
}

std::unique_ptr<LockSpace> open_lock_space(std::vector<Place> places) {
  if (places.size() == 1) {
    const Place& place = places.front();
    if (place.url.scheme == store::Url::Scheme::etcd) {
      return etcd_lock_space(place);
    }
    return store_lock_space(place);
  }
  for (auto it = places.begin(); it != places.end(); ++it) {
    const bool twice = std::any_of(places.begin(), it,
                                   [&](const Place& earlier) { return earlier.given == it->given; });
    if (twice) {
      // The same server twice would count one vote twice.
      throw Error(ErrorKind::usage, "--url '" + util::redact_secrets(it->given) + "'",
                  "given twice; a quorum needs independent servers");
    }
    if (it->url.scheme == store::Url::Scheme::etcd) {
      throw Error(ErrorKind::usage, "--url '" + it->url.redacted + "'",
                  "etcd is already a quorum: give its members in one URL, "
                  "etcd://HOST[:PORT],HOST[:PORT]..., and no other -u");
    }
  }
  return quorum_lock_space(std::move(places));
}

}  // namespace nxlock::lock
