// TracingStore: one trace line per backend step (see tracing_store.hpp).
#include "store/tracing_store.hpp"

#include <functional>

#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

// Keys and values longer than this are cut in a trace line.
using util::k_trace_bytes;

// "STEP arg1 arg2", every argument escaped.
std::string step_text(std::string_view step, std::initializer_list<std::string_view> args) {
  std::string line(step);
  for (const auto arg : args) {
    line += ' ';
    line += util::escape(arg, k_trace_bytes);
  }
  return line;
}

std::string optional_text(const std::optional<std::string>& value) {
  return value ? util::escape(*value, k_trace_bytes) : "(nil)";
}

// Runs `operation` and traces "<step> → <what it returned>", or the reason it
// failed (then rethrown).
template <typename Operation, typename Describe>
auto traced(const std::string& step, Operation operation, Describe describe) {
  if (!util::tracing()) {
    return operation();
  }
  try {
    auto result = operation();
    util::trace(step + " → " + describe(result));
    return result;
  } catch (const util::Error& e) {
    util::trace(step + " → failed: " + e.reason());
    throw;
  }
}

std::string flag_text(bool flag) {
  return flag ? "1" : "0";
}

std::string incr_text(std::string_view counter, std::int64_t token) {
  return ", INCR " + util::escape(counter, k_trace_bytes) + " → " + std::to_string(token);
}

// A fenced SETNX's answer: "1, INCR COUNTER → N" if it set the key, else "0".
// Appended, not "1" + ...: GCC 12 warns falsely (-Wrestrict) on that form.
std::string setnx_text(std::string_view counter, std::optional<std::int64_t> token) {
  std::string text = token ? "1" : "0";
  if (token) {
    text += incr_text(counter, *token);
  }
  return text;
}

// " if COUNTER = TOKEN" for a fenced step, nothing for a plain one.
std::string fence_condition(const std::optional<Fence>& fence) {
  if (!fence) {
    return {};
  }
  return " if " + util::escape(fence->counter, k_trace_bytes) + " = " +
         std::to_string(fence->token);
}

// The inner store's queue, each step traced as the documented steps it holds.
class TracingQueue final : public WaitersQueue {
 public:
  explicit TracingQueue(WaitersQueue& inner) : m_inner(inner) {}

  QueuedSet take_or_queue(std::string_view key, std::string_view value, std::string_view counter,
                          std::string_view queue, std::string_view ticket, bool waiting,
                          util::Micros lease, StepPolicy policy) override {
    // One step on the backend, traced as the documented steps it holds (the same
    // words as without a queue): the SETNX, or that another waiter goes first,
    // then the GET of a busy lock.
    const std::string step = step_text("SETNX", {key, value});
    const auto result = traced(
        step,
        [&] {
          return m_inner.take_or_queue(key, value, counter, queue, ticket, waiting, lease, policy);
        },
        [&](const QueuedSet& r) {
          switch (r.outcome) {
            case QueuedSet::Outcome::set:
              return setnx_text(counter, r.fence.value_or(0));
            case QueuedSet::Outcome::held:
              return setnx_text(counter, std::nullopt);
            case QueuedSet::Outcome::behind:
              break;
          }
          return "not tried: another waiter is first in " + util::escape(queue, k_trace_bytes);
        });
    if (util::tracing() && result.outcome != QueuedSet::Outcome::set) {
      util::trace(step_text("GET", {key}) + " → " + optional_text(result.current));
    }
    return result;
  }

  bool release_and_wake(std::string_view key, std::string_view expected, const Fence& fence,
                        std::string_view queue, StepPolicy policy) override {
    return traced(
        step_text("DEL-IF-EQUAL", {key, expected}) + fence_condition(fence),
        [&] { return m_inner.release_and_wake(key, expected, fence, queue, policy); }, flag_text);
  }

  void leave(std::string_view key, std::string_view queue, std::string_view ticket) override {
    traced(
        ticket.empty() ? step_text("WAKE-FIRST", {queue}) : step_text("LEAVE", {queue, ticket}),
        [&] {
          m_inner.leave(key, queue, ticket);
          return true;
        },
        [](bool) { return std::string("done"); });
  }

  std::unique_ptr<Watcher> watch_turn(std::string_view key, std::string ticket) override {
    return m_inner.watch_turn(key, std::move(ticket));
  }

 private:
  WaitersQueue& m_inner;
};

// The inner store's leases: "TAKE-LEASE key leases id expiry → 1 id, INCR ...".
class TracingShared final : public SharedLeases {
 public:
  explicit TracingShared(SharedLeases& inner) : m_inner(inner) {}

  Take take(const Keys& keys, const TakeRequest& request, StepPolicy policy) override {
    const std::string expiry_text = std::to_string(request.expiry);
    const std::string kind =
        request.slots > 0 ? "slot of " + std::to_string(request.slots) : std::string(request.id);
    return traced(
        step_text("TAKE-LEASE", {keys.lock, keys.leases, kind, expiry_text}),
        [&] { return m_inner.take(keys, request, policy); },
        [&](const Take& r) {
          switch (r.outcome) {
            case Take::Outcome::taken:
              return "1 " + r.id + incr_text(keys.counter, r.fence.value_or(0));
            case Take::Outcome::held:
              return "0, held: " + optional_text(r.current);
            case Take::Outcome::behind:
              break;
          }
          return "not tried: another waiter is first in " + util::escape(keys.queue, k_trace_bytes);
        });
  }

  static std::string number_text(std::optional<std::int64_t> number) {
    return number ? std::to_string(*number) : "-";
  }

  bool renew(const Keys& keys, const LeaseMatch& lease, std::int64_t expiry,
             StepPolicy policy) override {
    const std::string expiry_text = std::to_string(expiry);
    const std::string if_text = number_text(lease.expiry);
    const std::string token_text = number_text(lease.token);
    return traced(
        step_text("RENEW-LEASE",
                  {keys.lock, keys.leases, lease.id, if_text, token_text, expiry_text}),
        [&] { return m_inner.renew(keys, lease, expiry, policy); }, flag_text);
  }

  bool release(const Keys& keys, const LeaseMatch& lease, StepPolicy policy) override {
    const std::string if_text = number_text(lease.expiry);
    const std::string token_text = number_text(lease.token);
    return traced(
        step_text("RELEASE-LEASE", {keys.lock, keys.leases, lease.id, if_text, token_text}),
        [&] { return m_inner.release(keys, lease, policy); }, flag_text);
  }

  bool record_details(std::string_view leases, std::string_view id,
                      std::string_view details) override {
    return traced(
        step_text("DESCRIBE-SHARED", {leases, id}),
        [&] { return m_inner.record_details(leases, id, details); }, flag_text);
  }

  LeaseSet read(const Keys& keys) override {
    return traced(
        step_text("READ-LEASES", {keys.lock, keys.leases}), [&] { return m_inner.read(keys); },
        [](const LeaseSet& r) {
          return std::to_string(r.leases.size()) + (r.holding ? " holding" : " not holding");
        });
  }

 private:
  SharedLeases& m_inner;
};

// "LIST backup-* → 1000 locks" per batch, as the backend hands them over.
class TracingListing final : public LockListing {
 public:
  explicit TracingListing(LockListing& inner) : m_inner(inner) {}

  void list(std::string_view pattern, const Wanted& wanted, const Visit& visit) override {
    const std::string step = step_text("LIST", {pattern});
    traced(
        step,
        [&] {
          m_inner.list(pattern, wanted, [&](std::vector<ListedLock>&& batch) {
            if (util::tracing()) {
              util::trace(step + " → " + std::to_string(batch.size()) + " locks");
            }
            visit(std::move(batch));
          });
          return true;
        },
        [](bool) { return std::string("done"); });
  }

 private:
  LockListing& m_inner;
};

}  // namespace

TracingStore::TracingStore(std::unique_ptr<Store> inner) : m_inner(std::move(inner)) {
  if (WaitersQueue* queue = m_inner->queue()) {
    m_queue = std::make_unique<TracingQueue>(*queue);
  }
  if (SharedLeases* shared = m_inner->shared()) {
    m_shared = std::make_unique<TracingShared>(*shared);
  }
  if (LockListing* listing = m_inner->listing()) {
    m_listing = std::make_unique<TracingListing>(*listing);
  }
}

// A fenced step reads as the page's step, and the counter's INCR that came
// with it: "SETNX k 1795446489 → 1, INCR {k}:fence → 7".
SetIfAbsent TracingStore::set_if_absent(std::string_view key, std::string_view value,
                                        std::optional<std::string_view> counter,
                                        StepPolicy policy) {
  return traced(
      step_text("SETNX", {key, value}),
      [&] { return m_inner->set_if_absent(key, value, counter, policy); },
      [&](const SetIfAbsent& result) {
        return counter ? setnx_text(*counter, result.fence) : flag_text(result.set);
      });
}

std::optional<std::string> TracingStore::get(std::string_view key) {
  return traced(
      step_text("GET", {key}), [&] { return m_inner->get(key); }, optional_text);
}

Swap TracingStore::get_and_set(std::string_view key, std::string_view value,
                               std::optional<Takeover> takeover, StepPolicy policy) {
  return traced(
      step_text("GETSET", {key, value}),
      [&] { return m_inner->get_and_set(key, value, takeover, policy); },
      [&](const Swap& swap) {
        if (!takeover) {
          return optional_text(swap.old);
        }
        // A backend that compares first wrote nothing: the lock was not expired.
        return optional_text(swap.old) +
               (swap.fence ? incr_text(takeover->counter, *swap.fence) : "") +
               (swap.written ? "" : " (not expired: nothing written)");
      });
}

void TracingStore::set(std::string_view key, std::string_view value, StepPolicy policy) {
  traced(
      step_text("SET", {key, value}),
      [&] {
        m_inner->set(key, value, policy);
        return true;
      },
      [](bool) { return std::string("OK"); });
}

std::size_t TracingStore::del(const std::vector<std::string>& keys) {
  std::string step = "DEL";
  for (const auto& key : keys) {
    step += ' ';
    step += util::escape(key, k_trace_bytes);
  }
  return traced(
      step, [&] { return m_inner->del(keys); },
      [](std::size_t removed) { return std::to_string(removed); });
}

bool TracingStore::compare_and_delete(std::string_view key, std::string_view expected,
                                      std::optional<Fence> fence, StepPolicy policy) {
  return traced(
      step_text("DEL-IF-EQUAL", {key, expected}) + fence_condition(fence),
      [&] { return m_inner->compare_and_delete(key, expected, fence, policy); }, flag_text);
}

// "SET-IF-EQUAL k old new if {k}:fence = 7 → 1": the holder's value and token.
bool TracingStore::compare_and_set(std::string_view key, std::string_view expected,
                                   std::string_view value, std::optional<Fence> fence,
                                   StepPolicy policy) {
  return traced(
      step_text("SET-IF-EQUAL", {key, expected, value}) + fence_condition(fence),
      [&] { return m_inner->compare_and_set(key, expected, value, fence, policy); }, flag_text);
}

util::Micros TracingStore::now() {
  return traced(
      std::string("TIME"), [&] { return m_inner->now(); },
      [](util::Micros t) {
        const std::int64_t seconds = util::whole_seconds(t);
        const std::string micros =
            std::to_string((t - std::chrono::seconds(seconds)).count() + 1'000'000);
        return std::to_string(seconds) + "." + micros.substr(1);  // 1795443235.000042
      });
}

}  // namespace nxlock::store
