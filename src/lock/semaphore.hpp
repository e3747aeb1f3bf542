// Semaphore: a counting semaphore (--slots N), at most N holders of a key at once,
// each holding one of N slot locks.
//
// Slot i (1..N) of KEY is an ordinary Lock named slot_key(KEY, i), with its own
// fencing counter and holder details: every guarantee of one lock (tokens,
// renewal, release, lost-lock stop) holds per slot, with nothing new in the
// stores. The slots share one waiters' queue, queue_key(KEY): a waiter first
// in line tries every slot in turn and takes the first free one, one behind
// another waits its turn, so slots go to waiters in arrival order; a release
// of any slot wakes the first waiter.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/lock.hpp"

namespace nxlock::lock {

// --slots is at most this: far more than any fleet runs at once, few enough
// that a waiter first in line can try every slot on each look.
inline constexpr int k_max_slots = 1000;

// A slot's value as `lock --slots` prints it and `unlock`/`renew --slots` take
// it: "SLOT:TIMESTAMP" ("3:1795587227").
std::string slot_value(int slot, std::string_view value);

// The slot and lock value of a value given by a user for a semaphore of
// `slots` slots. Throws util::Error(usage) for anything else, a bare
// timestamp included (it names no slot).
struct SlotValue {
  int slot = 0;
  std::string value;
};
SlotValue parse_slot_value(std::string_view key, std::string_view text, int slots);

class Semaphore final : public Lockable {
 public:
  // The semaphore `key` (the full store key) of `slots` slots (1..k_max_slots)
  // on one store. Throws util::Error(usage) for a key named like a companion.
  Semaphore(store::Store& store, Clock& clock, std::string key, int slots);

  // The semaphore's key, as the user named it (prefix included): the slots'
  // keys are companions of it.
  const std::string& key() const override { return m_key; }

  // The slot this semaphore acts on (1..N): the one acquire() took, or
  // use_slot()'s; 0 before either.
  int slot() const override { return m_slot; }

  // From now on, release, renew and the holder details act on slot `slot`
  // (the `unlock`/`renew` of a value that `lock` printed).
  void use_slot(int slot);

  // The number of slots.
  int slots() const { return static_cast<int>(m_slots.size()); }

  // The fencing token of the slot's acquisition; 0 if none was made.
  std::int64_t fence() const override { return m_slot == 0 ? 0 : held().fence(); }

  // Takes the first free slot, waiting in line as the policy says: queued
  // with the others where the store keeps a queue, else looking again on a
  // poll tick and at the first holder's expiry. A busy result names the slot
  // that frees first (held_until, held_value). -n tries every slot once.
  AcquireResult acquire(std::int64_t ttl, const WaitPolicy& policy) override;

  // The Lock operations, on slot(): see Lock. Throws util::Error(internal)
  // before a slot is chosen.
  Verdict release(std::string_view value) override;
  Verdict release_after(std::string_view value, util::Micros not_before,
                        std::string& kept_value) override;
  Verdict renew(std::string_view value, std::int64_t ttl, std::string& new_value) override;
  void record_holder(Holder holder) override { held().record_holder(std::move(holder)); }

  // The details of the slot holding `value`: slot()'s, or, before a slot is
  // chosen, the first slot's that holds it (a busy message, a wait's progress).
  std::optional<Holder> holder_of(std::string_view value) override;

  // Deletes slot()'s lock, or every slot's when none is chosen; true if
  // something was there. Wakes the first waiter.
  bool force_release(std::optional<std::string>& holder_problem) override;

  // slot()'s state; before a slot is chosen, a free (or expired) slot's, else
  // the state of the slot that frees first: held exactly when every slot is.
  Status status() override;

  // Every slot's state, slot 1 first.
  std::vector<Status> statuses();

  void set_deadline(std::optional<util::Micros> monotonic_deadline) override {
    m_store.set_deadline(monotonic_deadline);
  }

 private:
  Lock& held() const;
  // Once a queued wait ends, another waiter may be first now while a slot is
  // free, its wake-up taken by us: it is woken (best effort).
  void hand_on();

  store::Store& m_store;
  Clock& m_clock;
  std::string m_key;
  std::string m_queue_key;
  std::vector<std::unique_ptr<Lock>> m_slots;
  int m_slot = 0;
};

}  // namespace nxlock::lock
