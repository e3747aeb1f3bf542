// Semaphore: N slot locks of one key, taken in arrival order through one waiters' queue.
#include "lock/semaphore.hpp"

#include <algorithm>
#include <charconv>

#include "lock/keys.hpp"
#include "lock/queue_ticket.hpp"
#include "lock/wait_loop.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using util::Micros;

// A value quoted in a message is cut after this many bytes.
constexpr std::size_t k_quoted_bytes = 40;

util::Error usage(std::string_view key, std::string why) {
  return util::Error(util::ErrorKind::usage, "lock '" + util::escape(key) + "'", std::move(why));
}

}  // namespace

std::string slot_value(int slot, std::string_view value) {
  return std::to_string(slot) + ":" + std::string(value);
}

SlotValue parse_slot_value(std::string_view key, std::string_view text, int slots) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    throw usage(key, "'" + util::escape(text, k_quoted_bytes) +
                         "' names no slot: with --slots, give the SLOT:VALUE that `lock "
                         "--slots` printed (such as 1:" +
                         util::escape(text, k_quoted_bytes) + ")");
  }
  const std::string_view digits = text.substr(0, colon);
  int slot = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || slot < 1 ||
      slot > slots) {
    throw usage(key, "'" + util::escape(text, k_quoted_bytes) + "' names no slot of 1.." +
                         std::to_string(slots) + " (SLOT:VALUE, as `lock --slots` printed it)");
  }
  return {slot, std::string(text.substr(colon + 1))};
}

Semaphore::Semaphore(store::Store& store, Clock& clock, std::string key, int slots)
    : m_store(store), m_clock(clock), m_key(std::move(key)), m_queue_key(queue_key(m_key)) {
  check_lock_key(m_key);
  if (slots < 1 || slots > k_max_slots) {
    throw usage(m_key, "--slots must be 1 to " + std::to_string(k_max_slots));
  }
  m_slots.reserve(static_cast<std::size_t>(slots));
  for (int i = 1; i <= slots; ++i) {
    m_slots.push_back(std::make_unique<Lock>(m_store, m_clock, slot_key(m_key, i), m_queue_key));
  }
}

void Semaphore::use_slot(int slot) {
  if (slot < 1 || slot > slots()) {
    throw usage(m_key,
                "slot " + std::to_string(slot) + " is not one of 1.." + std::to_string(slots()));
  }
  m_slot = slot;
}

Lock& Semaphore::held() const {
  if (m_slot == 0) {
    throw util::Error(util::ErrorKind::internal, "lock '" + util::escape(m_key) + "'",
                      "no slot chosen");
  }
  return *m_slots[static_cast<std::size_t>(m_slot - 1)];
}

AcquireResult Semaphore::acquire(std::int64_t ttl, const WaitPolicy& policy) {
  m_slot = 0;
  store::WaitersQueue* const waiters = m_store.queue();
  const bool forever = !policy.wait_for.has_value();
  // As Lock::acquire: a waiter queues, a single try (-n) only respects the queue.
  const bool waiting = waiters != nullptr && (forever || *policy.wait_for > Micros(0));
  const std::string& first_key = m_slots.front()->key();
  std::optional<QueueTicket> ticket;
  if (waiters != nullptr) {
    ticket.emplace(*waiters, first_key, m_queue_key, WaiterKind::slots);
  }
  std::unique_ptr<store::Watcher> watcher;
  bool stood_in_line = false;

  WaitSteps steps;
  steps.look = [&] {
    Look look;
    std::optional<std::int64_t> first_expiry;
    for (std::size_t i = 0; i < m_slots.size(); ++i) {
      Lock& slot = *m_slots[i];
      Attempt attempt;
      if (ticket) {
        // Joining (and renewing the lease) once a look is enough: the steps on
        // the other slots then find the ticket in line already.
        const bool join = waiting && i == 0;
        if (join) {
          ticket->joined(true);
        }
        attempt = slot.try_queued(ttl, ticket->ticket(), join);
        // In line now (a first slot taken at once never joined it).
        stood_in_line = stood_in_line || (join && attempt.outcome != Attempt::Outcome::acquired);
      } else {
        attempt = slot.try_once(ttl);
      }
      look.now_seconds = attempt.now_seconds;
      switch (attempt.outcome) {
        case Attempt::Outcome::acquired:
          if (attempt.dequeued) {
            ticket->joined(false);
          }
          m_slot = static_cast<int>(i) + 1;
          look.found = Look::Found::acquired;
          look.taken =
              taken_with(attempt.value, attempt.now_seconds, attempt.valid_from, attempt.fence);
          return look;
        case Attempt::Outcome::retry:
          look.found = Look::Found::again;
          return look;
        case Attempt::Outcome::busy:
          if (attempt.behind) {
            // Another waiter goes first, to whichever slot frees: nothing to
            // try (the gate is the same for every slot).
            look.found = Look::Found::busy;
            look.behind = true;
            if (attempt.held_until != 0) {
              look.held_until = attempt.held_until;
            }
            return look;
          }
          first_expiry = std::min(first_expiry.value_or(attempt.held_until), attempt.held_until);
          break;
      }
    }
    // Every slot held: wake at the first expiry, or at a release of any slot
    // (it wakes the first waiter, on any store that keeps a queue).
    look.found = Look::Found::busy;
    look.held_until = first_expiry;
    look.wake_at = first_expiry;
    return look;
  };
  // Queued, a release of any slot wakes the first waiter by its ticket. With
  // no queue, only the first slot's changes wake us: the others are seen on
  // a poll tick.
  watch_key(steps, m_store, first_key, ticket, watcher);
  const AcquireResult result = wait_for_lock(policy, m_clock, steps);
  ticket.reset();  // leaves the queue, if the step that took a slot did not
  watcher.reset();
  if (stood_in_line) {
    hand_on();
  }
  return result;
}

void Semaphore::hand_on() {
  // A release wakes the first waiter: we were, and may have taken wake-ups
  // for more slots than the one we took (or, giving up, for one we did not).
  // Each costs a GET; a busy slot needs no wake-up.
  try {
    for (int i = 1; i <= slots(); ++i) {
      const std::string& key = m_slots[static_cast<std::size_t>(i - 1)]->key();
      if (i != m_slot && !m_store.get(key)) {
        m_store.queue()->leave(key, m_queue_key, {});  // wakes the first waiter if `key` is free
        return;
      }
    }
  } catch (const util::Error& e) {
    util::trace(std::string("next waiter not woken (it looks on its tick): ") + e.what());
  }
}

Verdict Semaphore::release(std::string_view value) {
  return held().release(value);
}

Verdict Semaphore::release_after(std::string_view value, Micros not_before,
                                 std::string& kept_value) {
  return held().release_after(value, not_before, kept_value);
}

Verdict Semaphore::renew(std::string_view value, std::int64_t ttl, std::string& new_value) {
  return held().renew(value, ttl, new_value);
}

std::optional<Holder> Semaphore::holder_of(std::string_view value) {
  if (m_slot != 0) {
    return held().holder_of(value);
  }
  for (const auto& slot : m_slots) {
    if (auto holder = slot->holder_of(value)) {
      return holder;
    }
  }
  return std::nullopt;
}

bool Semaphore::force_release(std::optional<std::string>& holder_problem) {
  bool removed = false;
  for (int i = 1; i <= slots(); ++i) {
    if (m_slot != 0 && i != m_slot) {
      continue;
    }
    Lock& slot = *m_slots[static_cast<std::size_t>(i - 1)];
    if (slot.force_release(holder_problem)) {
      removed = true;
      // A plain delete wakes only the slot's own watchers: the first waiter
      // watches the queue.
      if (store::WaitersQueue* const waiters = m_store.queue()) {
        try {
          waiters->leave(slot.key(), m_queue_key, {});
        } catch (const util::Error& e) {
          util::trace(std::string("first waiter not woken (it polls): ") + e.what());
        }
      }
    }
  }
  return removed;
}

Status Semaphore::status() {
  if (m_slot != 0) {
    return held().status();
  }
  std::optional<Status> first_to_free;
  for (const auto& slot : m_slots) {
    Status status = slot->status();
    if (status.state != Status::State::held) {
      return status;
    }
    if (!first_to_free || status.expires_at < first_to_free->expires_at) {
      first_to_free = std::move(status);
    }
  }
  return *first_to_free;
}

std::vector<Status> Semaphore::statuses() {
  std::vector<Status> all;
  all.reserve(m_slots.size());
  for (const auto& slot : m_slots) {
    all.push_back(slot->status());
  }
  return all;
}

}  // namespace nxlock::lock
