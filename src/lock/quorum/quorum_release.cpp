// QuorumLock's release, release_after, renew and force_release: a step on
// every server at once, decided by a majority.
#include <algorithm>
#include <map>

#include "lock/quorum/quorum.hpp"
#include "lock/quorum/quorum_fanout.hpp"
#include "store/lock_value.hpp"

namespace nxlock::lock {

using namespace detail;  // the fan-out: ask(), Decision, Replies (quorum_fanout.hpp)
using util::Error;
using util::ErrorKind;
using util::Micros;

Verdict QuorumLock::tally(const std::vector<std::optional<Verdict>>& verdicts,
                          const std::vector<std::optional<Error>>& errors, const char* doing) {
  const std::size_t n = m_channels.size();
  std::size_t unanswered = 0;
  const Error* first = nullptr;
  // A server holding what is not a lock holds nothing of ours: it cannot stop a
  // majority of the others, and is the answer only where there is none.
  const Error* foreign = nullptr;
  for (const auto& error : errors) {
    if (error && error->kind() == ErrorKind::data) {
      foreign = foreign ? foreign : &*error;
    } else if (error && error->kind() != ErrorKind::unavailable) {
      throw *error;
    } else if (error) {
      ++unanswered;
      first = first ? first : &*error;
    }
  }
  std::map<Verdict, std::size_t> counts;
  for (const auto& verdict : verdicts) {
    if (verdict) {
      ++counts[*verdict];
    }
  }
  const std::size_t done = counts[Verdict::done];
  if (done >= majority_of(n)) {
    return Verdict::done;
  }
  if (done + unanswered >= majority_of(n)) {
    // The servers that did not answer could make it a majority or not: unknown.
    throw Error(ErrorKind::unavailable, "lock '" + m_key + "'",
                std::string(doing) + " on " + std::to_string(done) + " of " + std::to_string(n) +
                    " servers, " + std::to_string(unanswered) + " did not answer (a majority is " +
                    std::to_string(majority_of(n)) + "): " + first->what());
  }
  if (foreign) {
    throw *foreign;
  }
  // Not ours on a majority: say why as most of them do.
  Verdict why = Verdict::taken_over;
  std::size_t most = 0;
  for (const Verdict verdict : {Verdict::taken_over, Verdict::expired, Verdict::absent}) {
    if (counts[verdict] > most) {
      most = counts[verdict];
      why = verdict;
    }
  }
  return why;
}

Verdict QuorumLock::release(std::string_view value) {
  parse_user_value(m_key, value);  // a usage error before any server is touched
  std::vector<std::optional<Verdict>> verdicts;
  return on_every_holder(
      value, m_clock.now(), [](Lock& lock, std::string_view v) { return lock.release(v); },
      "released", verdicts, true);
}

Verdict QuorumLock::on_every_holder(std::string_view value, Micros reading,
                                    std::function<Verdict(Lock&, std::string_view)> step,
                                    const char* doing,
                                    std::vector<std::optional<Verdict>>& verdicts,
                                    bool letting_go) {
  const std::size_t majority = majority_of(m_channels.size());
  // Copies for the jobs: one may run after this call returns.
  const std::string first(value);
  const std::vector<std::string> written = m_written;
  const bool acquired = m_fence != 0;
  // Letting go of our acquisition: the servers yet to do it once a majority
  // did (one that took the lock late among them) get until the deadline, so
  // that nxlock does not exit before them. Any other step, and a shell's
  // release (it took nothing late), waits for nobody once it is done.
  const bool wait_for_late = letting_go && acquired;
  const Decision once_done = wait_for_late ? Decision::done_after_grace : Decision::done_now;
  const Micros grace = !wait_for_late ? k_straggler_grace
                       : m_deadline   ? std::max(*m_deadline - util::mono_now(), Micros(0))
                                      : k_best_effort_patience;
  const auto replies = ask<Verdict>(
      m_channels,
      [first, written, reading, step, acquired](QuorumChannel& channel) {
        channel.clock.set(reading);
        Lock& lock = channel.open();
        if (acquired && lock.fence() == 0) {
          // Our acquisition took no token here, so nothing here is ours. Unfenced,
          // the step would match by value alone, and a taker in the same second
          // writes the same value: we would renew its lock as ours, then delete it.
          return Verdict::held_by_other;
        }
        return on_value_or_earlier(
            first, written, [&](const std::string& candidate) { return step(lock, candidate); });
      },
      // Decided once a majority did it, or once it cannot be one even if the
      // servers that failed or are yet to reply did it: then it is not ours
      // (tally() says unavailable only while they could still make it one).
      [majority, once_done](const Replies<Verdict>& so_far) {
        std::size_t done = 0;
        for (const auto& verdict : so_far.values) {
          done += verdict == Verdict::done ? 1 : 0;
        }
        return done >= majority                                   ? once_done
               : done + so_far.pending + so_far.failed < majority ? Decision::done_after_grace
                                                                  : Decision::open;
      },
      m_deadline, everyone(), std::nullopt, grace, letting_go ? Backlog::exempt : Backlog::capped);
  verdicts = replies.values;
  return tally(verdicts, replies.errors, doing);
}

Kept QuorumLock::release_after(std::string_view value, Micros not_before) {
  const Micros reading = m_clock.now();
  if (not_before <= reading) {
    return {release(value), {}};
  }
  parse_user_value(m_key, value);
  std::vector<std::optional<Verdict>> verdicts;
  const Verdict verdict = on_every_holder(
      value, reading,
      [not_before](Lock& lock, std::string_view v) {
        return lock.release_after(v, not_before).verdict;
      },
      "kept for --hold", verdicts, true);
  if (verdict != Verdict::done) {
    return {verdict, {}};
  }
  return {verdict, std::to_string(expiry_holding_until(not_before))};
}

RenewalPlan QuorumLock::plan_renewal(std::string_view value, std::int64_t ttl) {
  parse_user_value(m_key, value);  // a usage error before any server is touched
  const Micros reading = m_clock.now();
  return {ttl, reading, std::to_string(expiry_for(util::whole_seconds(reading), ttl))};
}

Renewed QuorumLock::renew(std::string_view value, const RenewalPlan& plan) {
  parse_user_value(m_key, value);
  const std::int64_t now = util::whole_seconds(plan.reading);
  const std::string& next = plan.value;
  // Values that have expired can be nobody's now: no need to try them again.
  std::erase_if(m_written, [&](const std::string& v) {
    const auto parsed = store::parse_lock_timestamp(v);
    return !parsed || *parsed < now;
  });
  // What this renewal writes may have been stored even if its reply is lost: a
  // later step tries it as ours. Not this one: `next` is also what renewing
  // the value before ours computes in the same second, which is not ours.
  const auto remember_next = [&] {
    if (std::find(m_written.begin(), m_written.end(), next) == m_written.end()) {
      m_written.push_back(next);
    }
  };
  std::vector<std::optional<Verdict>> verdicts;
  // Each server's lock reads the clock frozen at the plan's reading: its own
  // plan writes the same value.
  Verdict verdict = Verdict::done;
  try {
    verdict = on_every_holder(
        value, plan.reading,
        [ttl = plan.ttl](Lock& lock, std::string_view v) { return lock.renew(v, ttl).verdict; },
        "renewed", verdicts, false);
  } catch (const Error&) {
    remember_next();
    throw;
  }
  remember_next();
  if (verdict != Verdict::done) {
    // Lost on a majority: the minority that renewed lets go, so the next taker
    // need not wait for it to expire.
    std::vector<bool> keep(m_channels.size());
    for (std::size_t i = 0; i < keep.size(); ++i) {
      keep[i] = verdicts[i] && verdicts[i] != Verdict::done;
    }
    // A shell's renew has no token: its own writes go. A holder's go only under its token.
    undo(next, keep, m_fence != 0);
    return {verdict, {}};
  }
  return {verdict, next};
}

Removal QuorumLock::force_release() {
  const std::size_t majority = majority_of(m_channels.size());
  const auto replies = ask<Removal>(
      m_channels, [](QuorumChannel& channel) { return channel.open().force_release(); },
      [majority](const Replies<Removal>& so_far) {
        return so_far.answered >= majority ? Decision::done_after_grace : Decision::open;
      },
      m_deadline, everyone());
  std::size_t answered = 0;
  Removal removal;
  for (std::size_t i = 0; i < m_channels.size(); ++i) {
    const auto& error = replies.errors[i];
    if (error && error->kind() != ErrorKind::unavailable) {
      throw *error;
    }
    if (const auto& one = replies.values[i]) {
      ++answered;
      removal.removed = removal.removed || one->removed;
      if (one->holder_problem && !removal.holder_problem) {
        removal.holder_problem = one->holder_problem;
      }
    }
  }
  if (answered < majority) {
    throw no_majority(answered, replies.errors);
  }
  return removal;
}

}  // namespace nxlock::lock
