// EtcdMutex: a waiter's turn (the key before ours watched), kept through a failover or a stall.
#include <poll.h>

#include <algorithm>

#include "lock/etcd_mutex.hpp"
#include "lock/pacing.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

using store::etcd::Compare;
using util::Error;
using util::ErrorKind;
using util::Micros;
using util::wall_seconds;

}  // namespace

bool EtcdMutex::keep_place() {
  const Micros sent = util::mono_now();
  if (m_kv.keep_alive(m_lease) <= 0) {
    // Revoked or lapsed (a member that was frozen past its TTL may revoke it as it
    // comes back): its key went with it, so the line is joined again, at its end.
    util::trace("etcd: our lease is gone while waiting: in line again");
    m_lease = 0;
    m_rev = 0;
    return false;
  }
  m_last_sent = sent;
  return true;
}

bool EtcdMutex::take_turn() {
  const std::string mine = key_of(m_lease);
  store::etcd::TxnRequest request;
  request.compare.push_back(Compare::created_at(mine, m_rev));
  request.compare.push_back(Compare::on_lease(mine, m_lease));
  request.success.emplace_back(
      store::etcd::PutRequest{mine, std::string(k_etcd_held), m_lease, false});
  const store::etcd::TxnResult txn = m_kv.txn(request);
  if (!txn.succeeded) {
    util::trace("etcd: our key is gone while waiting: in line again");
    m_rev = 0;  // the lease may live on: its key is put again (at the end of the line)
    return false;
  }
  // Made after every key before ours was gone, so after every earlier holder's
  // token was taken; a retry after a lost answer makes a later one.
  m_fence = txn.header.revision;
  return true;
}

EtcdMutex::WaitEnd EtcdMutex::wait_turn(std::int64_t ttl, const WaitPolicy& policy, Micros began) {
  const Micros interval =
      std::max(Micros(std::min(ttl, m_granted) * 1'000'000 / 3), Micros(100'000));
  // No -w: never (Micros::max()).
  const Micros give_up = policy.wait_for ? began + *policy.wait_for : Micros::max();
  for (;;) {
    try {
      if (m_rev == 0) {
        // Out of line (the lease or our key was lost): in again, at its end; the
        // next pass looks at who is before us.
        join(ttl);
        continue;
      }
      if (util::mono_now() >= m_last_sent + interval && !keep_place()) {
        continue;
      }
      const auto before = predecessor();
      if (!before) {
        // First: the lease confirmed within an interval, as the hold's deadline
        // counts from it, and the put that begins the hold, while our key is ours.
        if (util::mono_now() >= m_last_sent + interval && !keep_place()) {
          continue;
        }
        if (!take_turn()) {
          continue;
        }
        return WaitEnd::first;
      }
      if (policy.on_wait) {
        policy.on_wait({wall_seconds() + m_granted, wall_seconds(), util::mono_now() - began});
      }
      // Only the key just before ours: its DELETE is our turn to look (no herd).
      const auto watch = m_kv.watch(before->kv.key, before->revision + 1);
      for (bool look_again = false; !look_again;) {
        // At each keepalive, a linearizable look as well: a watch on a member
        // that is frozen, or cut off from its leader, may go silent.
        const Micros next_keepalive = m_last_sent + interval;
        pollfd fds[2] = {{watch->fd(), POLLIN, 0}, {policy.interrupt_fd, POLLIN, 0}};
        util::poll_until(fds, 2, std::min(next_keepalive, give_up));
        if (fds[1].revents != 0) {
          return WaitEnd::interrupted;
        }
        if (fds[0].revents != 0) {
          const store::etcd::WatchNews news = watch->take();
          look_again = news.deleted || news.ended;
        }
        const Micros now = util::mono_now();
        if (!look_again && now >= give_up) {
          return WaitEnd::gave_up;
        }
        look_again = look_again || now >= next_keepalive;
      }
    } catch (const Error& e) {
      // A failover, a frozen member, a lost quorum: waited out like a busy lock,
      // until the wait's end (man page, lock), our place kept while the lease lives.
      const Micros now = util::mono_now();
      if (e.kind() != ErrorKind::unavailable || now >= give_up) {
        throw;
      }
      util::trace(std::string("etcd: waiting on: ") + e.what());
      if (util::readable_before(policy.interrupt_fd,
                                std::min(now + pacing::jittered_poll(), give_up))) {
        return WaitEnd::interrupted;
      }
    }
  }
}

}  // namespace nxlock::lock
