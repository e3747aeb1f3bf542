// Renewal: every ttl/3, and through backend trouble until the job must be stopped.
#include "run/renewal.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "run/stages.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/random.hpp"

namespace nxlock::run {

namespace {

using util::Micros;

// The last retry but one goes this long before the job must be stopped.
constexpr Micros k_last_chance{100'000};

}  // namespace

Renewal::Renewal(lock::Lockable& lock, HeldLock& held, std::int64_t ttl, Micros lead,
                 const Reporter& reporter,
                 std::function<void(const std::string& planned)> before_write)
    : m_lock(lock),
      m_held(held),
      m_ttl(Micros(ttl * 1'000'000)),
      m_interval(std::max(m_ttl / 3, Micros(100'000))),
      m_lead(lead),
      m_next(util::mono_now() + m_interval),
      m_backoff(k_backoff_first),
      m_reporter(reporter),
      m_before_write(std::move(before_write)) {}

std::optional<Loss> Renewal::step() {
  const Micros sent = util::mono_now();
  if (sent < m_next) {
    return std::nullopt;
  }
  // The value this renewal writes, known before any write: if renew() throws,
  // its reply was lost, and the value may have been stored even so.
  std::string written;
  const Micros act_by = m_held.valid_until - m_lead;
  try {
    lock::DeadlineScope deadline(m_lock, act_by);
    const lock::RenewalPlan plan = m_lock.plan_renewal(m_held.value, m_ttl.count() / 1'000'000);
    written = plan.value;
    if (m_before_write) {
      m_before_write(written);
    }
    std::string renewed;
    const lock::Verdict verdict =
        lock::on_value_or_earlier(m_held.value, m_held.maybe_ours, [&](const std::string& value) {
          lock::Renewed step = m_lock.renew(value, plan);
          renewed = std::move(step.value);
          return step.verdict;
        });
    if (verdict != lock::Verdict::done) {
      return Loss{verdict, {}};
    }
    // A failover can hand the lock to a replica that never had this renewal
    // (the replica that confirmed it re-syncs from the new master and drops
    // it): the value before it, under our token, is still ours.
    m_held.maybe_ours.assign(1, m_held.value);
    m_held.value = renewed;
    // The new value was computed after `sent`; a quorum's drift margin comes off.
    m_held.valid_until = sent + m_ttl - m_lock.validity_margin(m_ttl.count() / 1'000'000);
    m_next = util::mono_now() + m_interval;
    m_backoff = k_backoff_first;
    if (m_trouble_since) {
      m_reporter.warn("lock '" + util::escape(m_lock.key()) + "' renewed again after " +
                      util::seconds_text(util::mono_now() - *m_trouble_since) +
                      " of backend trouble");
      m_trouble_since.reset();
    }
    return std::nullopt;
  } catch (const util::Error& e) {
    if (!written.empty() && written != m_held.value) {
      m_held.maybe_ours.push_back(written);
    }
    const Micros now = util::mono_now();
    if (now >= act_by) {
      return Loss{std::nullopt, std::string("no renewal was confirmed before it could expire (") +
                                    e.what() + ")"};
    }
    if (!m_trouble_since) {
      m_trouble_since = now;
      m_reporter.warn(std::string("renewal failed, retrying while the lock is valid (") +
                      util::seconds_text(act_by - now) + " left): " + e.what());
    }
    // One attempt goes shortly before that moment, with time to reconnect
    // to a server that is back (the back-off alone may leave half a second
    // unused); the last goes at that moment itself, with no time left: it
    // fails at once, and the loss is acted on then, not a --io-timeout later.
    const Micros last_chance = act_by - k_last_chance;
    m_next = std::min(now + util::jittered(m_backoff), now < last_chance ? last_chance : act_by);
    m_backoff = std::min(m_backoff * 2, k_backoff_cap);
    return std::nullopt;
  }
}

}  // namespace nxlock::run
