// The quorum's workers: a thread and a queue per server, started, fed and stopped.
#include "lock/quorum/quorum_fanout.hpp"

#include <pthread.h>
#include <signal.h>

#include <system_error>

#include "util/trace.hpp"

namespace nxlock::lock::detail {

namespace {

using util::Micros;

void serve(const std::shared_ptr<QuorumChannel>& channel) {
  std::unique_lock<std::mutex> lock(channel->mutex);
  for (;;) {
    channel->wake.wait(lock, [&] { return channel->stop || !channel->jobs.empty(); });
    if (channel->stop) {
      return;  // queued jobs are dropped: the lock that queued them is gone
    }
    auto job = std::move(channel->jobs.front());
    channel->jobs.pop_front();
    lock.unlock();
    job(*channel);
    lock.lock();
    --channel->backlog;
    channel->idle.notify_all();
  }
}

}  // namespace

Channels start_channels(std::vector<QuorumServer> servers, const std::string& key) {
  // The workers never take a signal: they start with every signal blocked that
  // may be blocked (they inherit this thread's mask), whether or not the caller
  // has blocked them yet for its signalfd (run-locked forwards them to the job).
  struct MaskedWhileStarting {
    MaskedWhileStarting() {
      sigset_t all;
      sigfillset(&all);
      for (const int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) {
        sigdelset(&all, synchronous);  // a fault must still end the process as it should
      }
      pthread_sigmask(SIG_BLOCK, &all, &original);
    }
    ~MaskedWhileStarting() { pthread_sigmask(SIG_SETMASK, &original, nullptr); }
    sigset_t original{};
  } masked;
  Channels channels;
  for (auto& spec : servers) {
    auto channel = std::make_shared<QuorumChannel>(std::move(spec), key);
    try {
      // The worker holds the channel too: if it must be left behind at exit
      // (a stopped server), what it works on stays alive with it.
      channel->worker = std::thread([channel] { serve(channel); });
    } catch (const std::system_error&) {
      // No thread to be had: this server's jobs run on the caller's thread.
    }
    channels.push_back(std::move(channel));
  }
  return channels;
}

bool wait_idle(const Channels& channels, Micros timeout) {
  const Micros until = util::mono_now() + timeout;
  bool idle = true;
  for (const auto& channel : channels) {
    std::unique_lock<std::mutex> lock(channel->mutex);
    while (channel->backlog > 0 && util::mono_now() < until) {
      channel->idle.wait_for(lock,
                             std::chrono::microseconds((until - util::mono_now()).count() + 1));
    }
    idle = idle && channel->backlog == 0;
  }
  return idle;
}

void stop_channels(const Channels& channels) {
  for (const auto& channel : channels) {
    std::unique_lock<std::mutex> lock(channel->mutex);
    const bool idle = channel->backlog == 0;
    channel->stop = true;
    lock.unlock();
    channel->wake.notify_all();
    if (channel->worker.joinable()) {
      if (idle) {
        channel->worker.join();
      } else {
        util::trace("quorum: not waiting for " + channel->spec.name);
        channel->worker.detach();
      }
    }
  }
}

bool is_idle(QuorumChannel& channel) {
  std::lock_guard<std::mutex> guard(channel.mutex);
  return channel.backlog == 0;
}

bool post(QuorumChannel& channel, std::function<void(QuorumChannel&)> job, Backlog backlog) {
  if (!channel.worker.joinable()) {
    job(channel);
    return true;
  }
  {
    std::lock_guard<std::mutex> guard(channel.mutex);
    if (channel.backlog >= k_max_backlog && backlog == Backlog::capped) {
      return false;
    }
    channel.jobs.push_back(std::move(job));
    ++channel.backlog;
  }
  channel.wake.notify_one();
  return true;
}

}  // namespace nxlock::lock::detail
