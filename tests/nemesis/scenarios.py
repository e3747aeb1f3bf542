"""The sixteen scenarios: each one fault, made with real parts, against a workload of clients
that share one lock (clock-skew: one on Redis, one on the embedded store; the four on
etcd are in etcd_scenarios.py).

A pause or cut lasts ttl + 3 s: the lock's value is now+ttl+1 in whole seconds, so by
then it has expired for every other client and one of them (waiting in line) takes it.
"""
import os
import signal
import socket
import threading

import netns
import processes
from scenario import Scenario, Skipped  # (it puts tests/cli on the path)
from workload import Client

from servers import RedisServer  # noqa: E402
from sentinel_harness import Deployment  # noqa: E402

TTL = 2
# A pause or cut: past the lock's expiry (now+ttl+1, in whole seconds) for every client.
FAULT = TTL + 3
# A job this long, hit 0.3 s after its start, would still run when the fault ends.
OUTLIVES = 0.3 + FAULT + 1
HEAD_START = 0.2  # pause-job: seconds the job runs after a pause before nxlock does


# Holders of the other kinds beside a scenario's exclusive ones, on the same lock: two
# --shared holders and one of a --slots 2 semaphore (the checker lets shared sections
# overlap each other, and slot sections in distinct slots; nothing else).
KINDS = ("shared", "shared", "slots:2")


def _clients(scenario, global_args, count=3, lock="x", kinds=(), **kwargs):
    """`count` exclusive clients A, B, ... and one client of each of `kinds` (S1, S2, ...)."""
    found = [Client(scenario, chr(ord("A") + i), lock, global_args, ttl=scenario.ttl, **kwargs)
             for i in range(count)]
    found += [Client(scenario, "S%d" % (i + 1), lock, global_args, ttl=scenario.ttl, kind=kind,
                     seconds=(0.3, 2.0))
              for i, kind in enumerate(kinds)]
    return found


class Partition(Scenario):
    name = "partition"
    how = ("client A runs in its own network namespace (veth pair; the server also listens on "
           "the host side's address); iptables DROP in the namespace cuts it off mid-job for "
           "ttl+3 s, then the rules are flushed")

    def setup(self):
        why = netns.available()
        if why:
            raise Skipped(why)
        self.ns = netns.Namespace()
        self.servers.append(self.ns)
        # Not loopback only: protected mode would refuse the namespace's connections.
        self.redis = RedisServer(extra=["--protected-mode", "no"], bind=[self.ns.host_address])
        self.servers.append(self.redis)
        self.clients = [
            Client(self, "A", "x", ["-u", self.redis.url_for(self.ns.host_address)], ttl=self.ttl,
                   netns=self.ns.name, seconds=(6.5, 9)),
            *[Client(self, name, "x", ["-u", self.redis.url], ttl=self.ttl, seconds=(0.5, 3))
              for name in ("B", "C")]]

    def fault(self, round_number):
        owner, _ = self.wait_section(client="A", planned=OUTLIVES)
        if owner is None:
            return False
        self.let_run(0.3)
        self.note_fault("cut", client="A")
        self.ns.cut()
        try:
            self.let_run(FAULT)
        finally:
            self.ns.heal()
            self.note_fault("heal")
        self.let_run(1)
        return True


class PauseNxlock(Scenario):
    name = "pause-nxlock"
    how = ("SIGSTOP of the holder's nxlock process alone (its watchdog and job run on) for "
           "ttl+3 s, then SIGCONT")

    def setup(self):
        self.redis = RedisServer()
        self.servers.append(self.redis)
        self.clients = _clients(self, ["-u", self.redis.url], count=2, seconds=(6.5, 9),
                                kinds=KINDS)

    def pids(self, owner):
        """(the processes resumed last, the job's processes resumed first)."""
        return [owner.current.pid], []

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=OUTLIVES)
        if owner is None:
            return False
        self.let_run(0.3)
        process = owner.current
        if process is None or process.poll() is not None:
            return False
        supervisors, job = self.pids(owner)
        self.note_fault("pause", client=owner.client, pids=supervisors + job)
        processes.pause(supervisors + job)
        try:
            self.let_run(FAULT)
        finally:
            if job:
                # The job first, with a head start: it writes before its supervisor can
                # learn of the loss, as a job resumed from a GC pause or a frozen VM does.
                processes.resume(job)
                self.let_run(HEAD_START)
            processes.resume(supervisors)
            self.note_fault("resume")
        self.let_run(1)
        return True


class PauseJob(PauseNxlock):
    name = "pause-job"
    expected_overlaps = True
    how = ("SIGSTOP of the whole job (nxlock, its watchdog, the job) for ttl+3 s, then SIGCONT, "
           "the job 0.2 s before nxlock and its watchdog: a paused holder cannot know it lost "
           "the lock, only fencing refuses its writes")

    def pids(self, owner):
        nxlock = owner.current.pid
        supervisors = [nxlock] + processes.children(nxlock)  # nxlock and its watchdog
        job = [pid for watchdog in supervisors[1:] for pid in processes.descendants(watchdog)]
        return supervisors, job


class RestartNopersist(Scenario):
    name = "restart-nopersist"
    expected_overlaps = True
    how = ("redis-server without persistence (--save '' --appendonly no) stopped with SIGTERM "
           "mid-job and started again on its port: every lock and counter is gone")
    options = []
    crash = False

    def setup(self):
        self.redis = RedisServer(extra=self.options)
        self.servers.append(self.redis)
        self.clients = _clients(self, ["-u", self.redis.url], seconds=(0.5, 4),
                                kinds=KINDS if not self.expected_overlaps else ())

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=1.5)
        if owner is None:
            return False
        self.let_run(0.3)
        self.note_fault("restart", crash=self.crash)
        self.redis.restart(crash=self.crash)
        self.note_fault("restarted")
        self.let_run(2)
        return True


class RestartAof(RestartNopersist):
    name = "restart-aof"
    expected_overlaps = False
    how = ("redis-server with --appendonly yes --appendfsync always killed with SIGKILL "
           "mid-job (a crash) and started again from its AOF: every acknowledged write was "
           "fsynced before its reply, so nothing acknowledged is lost")
    options = ["--appendonly", "yes", "--appendfsync", "always"]
    crash = True


class Eviction(Scenario):
    name = "eviction"
    how = ("redis-server with --maxmemory 2mb --maxmemory-policy allkeys-lru; each round "
           "writes 300 values of 16 kB mid-job: nxlock must refuse such a server (exit 78), "
           "so no section may run at all")

    def setup(self):
        self.redis = RedisServer(extra=["--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"])
        self.servers.append(self.redis)
        self.clients = _clients(self, ["-u", self.redis.url], seconds=(0.5, 3))

    def fault(self, round_number):
        self.wait_section(planned=1, timeout=4)  # a refusing nxlock runs none: go on anyway
        self.let_run(0.3)
        written = fill(self.redis.port, "filler%d:" % round_number, 300, 16384)
        self.note_fault("pressure", written=written)
        self.let_run(1)
        return True

    def verdict_extra(self, counts):
        if counts["sections"]:
            return ["%d sections ran on a server that may evict the lock (nxlock must refuse "
                    "it with exit 78)" % counts["sections"]]
        return []


def fill(port, prefix, count, size, batch=50):
    """Memory pressure: SETs `count` keys `prefix`N of `size` bytes each, pipelined in
    batches on one connection; how many the server accepted (bounded: 3 s a batch)."""
    value = b"v" * size
    accepted = 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            for first in range(0, count, batch):
                keys = [("%s%d" % (prefix, i)).encode() for i in range(first, min(count,
                                                                                first + batch))]
                s.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                                   % (len(k), k, size, value) for k in keys))
                replies = b""
                while replies.count(b"\r\n") < len(keys):
                    chunk = s.recv(65536)
                    if not chunk:
                        return accepted
                    replies += chunk
                accepted += replies.count(b"+OK\r\n")
    except OSError:
        pass
    return accepted


class Failover(Scenario):
    name = "failover"
    how = ("one master, two replicas, three Sentinels (quorum 2); clients use the Sentinels "
           "with --replicas 1; SENTINEL FAILOVER mid-job, then wait until all agree again")

    def setup(self):
        # Both replicas re-sync at once after a failover (parallel-syncs 2), in 5 s at most.
        self.deployment = Deployment(replicas=2, sentinels=3, failover_timeout=5000,
                                     parallel_syncs=2)
        self.servers.append(self.deployment)
        self.clients = _clients(self, ["-u", self.deployment.url(), "--replicas", "1"],
                                seconds=(1, 4))

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=2)
        if owner is None:
            return False
        self.let_run(0.3)
        self.note_fault("failover")
        port = self.deployment.failover()
        self.note_fault("failed-over", master=port)
        if port is None:
            self.notes.append("round %d: the failover did not complete (SENTINEL FAILOVER: %s)"
                              % (round_number, self.deployment.last_reply))
            return False
        if not self.deployment.settled(timeout=30):
            self.notes.append("round %d: the deployment did not settle" % round_number)
        self.let_run(1)
        return True


class QuorumRestart(Scenario):
    name = "quorum-restart"
    expected_overlaps = True
    how = ("three independent redis-servers without persistence (-u A -u B -u C); mid-job one "
           "is restarted (SIGTERM, start), and 0.5 s later the next one: the held lock is then "
           "on one server only, the classic Redlock restart case")

    def setup(self):
        self.redis = [RedisServer() for _ in range(3)]
        self.servers.extend(self.redis)
        urls = []
        for server in self.redis:
            urls += ["-u", server.url]
        self.clients = _clients(self, urls, seconds=(2, 5))

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=2.5)
        if owner is None:
            return False
        self.let_run(0.3)
        for i in (round_number % 3, (round_number + 1) % 3):
            self.note_fault("restart", server=i)
            self.redis[i].restart()
            self.let_run(0.5)
        self.let_run(2)
        return True


class ClockSkew(Scenario):
    name = "clock-skew"
    how = ("while a client holds the lock, a client whose clock is 2 h ahead (odd rounds: "
           "2 h behind; faketime -f, FAKETIME_DONT_FAKE_MONOTONIC=1) asks for it, on Redis "
           "and on the embedded store at once")

    def setup(self):
        self.redis = RedisServer()
        self.servers.append(self.redis)
        store = "file://" + os.path.join(self.dir, "store")
        env = dict(os.environ, FAKETIME_DONT_FAKE_MONOTONIC="1")
        self.clients = []
        self.skewed = {}
        for lock, url in (("redis", self.redis.url), ("file", store)):
            for name in ("1", "2"):
                self.clients.append(Client(self, lock + name, lock, ["-u", url], ttl=self.ttl,
                                           seconds=(1, 3)))
            for skew in ("+2h", "-2h"):
                self.skewed[lock, skew] = Client(
                    self, "%s%s" % (lock, skew), lock, ["-u", url], ttl=self.ttl,
                    seconds=(1, 3), wrapper=["faketime", "-f", skew], env=env)

    def fault(self, round_number):
        skew = "+2h" if round_number % 2 == 0 else "-2h"
        # The history follower is not thread-safe: find both sections first, in turn.
        threads = []
        for lock in ("redis", "file"):
            owner, _ = self.wait_section(lock=lock, planned=1.5, timeout=15)
            if owner is None:
                return False
            self.note_fault("skewed-run", lock=lock, skew=skew)
            thread = threading.Thread(target=self.skewed[lock, skew].run_once, daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join(timeout=self.skewed["redis", skew].bound + 5)
        self.let_run(0.5)
        return True

    def _teardown(self):
        for client in getattr(self, "skewed", {}).values():
            client.stop()
        super()._teardown()


class TermIgnored(Scenario):
    name = "term-ignored"
    how = ("the jobs ignore SIGTERM (trap '' TERM); the holder loses its lock because its "
           "redis-server is paused (SIGSTOP) for ttl+3 s mid-job; the default --kill-after")

    def setup(self):
        self.redis = RedisServer()
        self.servers.append(self.redis)
        self.clients = _clients(self, ["-u", self.redis.url], count=2, seconds=(6.5, 9),
                                ignore_term=True)

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=OUTLIVES)
        if owner is None:
            return False
        self.let_run(0.3)
        self.note_fault("pause-server")
        self.redis.pause()
        try:
            self.let_run(FAULT)
        finally:
            self.redis.resume()
            self.note_fault("resume-server")
        self.let_run(1)
        return True


class KillNxlock(Scenario):
    name = "kill-nxlock"
    how = ("SIGKILL of the holder's nxlock process alone, 0.3 s into its job, in a loop; its "
           "watchdog stops the job (SIGTERM; the jobs of client B ignore it and get SIGKILL "
           "after --kill-after 1) and then releases the lock, which the next client takes")

    def setup(self):
        self.redis = RedisServer()
        self.servers.append(self.redis)
        url = ["-u", self.redis.url]
        self.clients = [
            Client(self, "A", "x", url, ttl=self.ttl, seconds=(1.5, 3)),
            Client(self, "B", "x", url, ttl=self.ttl, seconds=(1.5, 3), ignore_term=True,
                   extra_args=["--kill-after", "1"]),
            Client(self, "C", "x", url, ttl=self.ttl, seconds=(1.5, 3)),
            *[Client(self, "S%d" % (i + 1), "x", url, ttl=self.ttl, kind=kind, seconds=(0.5, 2.0))
              for i, kind in enumerate(KINDS)]]

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=1.0)
        if owner is None:
            return False
        self.let_run(0.3)
        process = owner.current
        if process is None or process.poll() is not None:
            return False
        self.note_fault("kill", client=owner.client, pids=[process.pid])
        processes.signal_pid(process.pid, signal.SIGKILL)
        self.let_run(1)
        return True


class Replace(Scenario):
    name = "replace"
    how = ("run-locked --replace of the holder, 0.3 s into its job, in a loop, beside plain "
           "waiters: the jobs of clients A and B ignore SIGTERM (SIGKILL after --kill-after "
           "1), C's exit on it; the replacer R's job runs only once the old one is gone")

    def setup(self):
        self.redis = RedisServer()
        self.servers.append(self.redis)
        url = ["-u", self.redis.url]
        self.clients = [
            Client(self, "A", "x", url, ttl=self.ttl, seconds=(2, 4), ignore_term=True,
                   extra_args=["--kill-after", "1"]),
            Client(self, "B", "x", url, ttl=self.ttl, seconds=(2, 4), ignore_term=True,
                   extra_args=["--kill-after", "1"]),
            Client(self, "C", "x", url, ttl=self.ttl, seconds=(2, 4))]
        # Not started as a thread: fault() runs it once a round, while another holds.
        self.replacer = Client(self, "R", "x", url, ttl=self.ttl, seconds=(0.3, 0.6),
                               extra_args=["--replace"])

    def fault(self, round_number):
        owner, _ = self.wait_section(planned=1.0)
        if owner is None:
            return False
        self.let_run(0.3)
        self.note_fault("replace", client=owner.client)
        self.replacer.run_once()
        self.let_run(0.5)
        return True


# The etcd scenarios (etcd_scenarios.py) imported here, after what they build on.
from etcd_scenarios import (EtcdBlindDelete, EtcdLeaderKill, EtcdQuorumLoss,  # noqa: E402
                            EtcdWaitersFailover)

ALL = [Partition, PauseNxlock, PauseJob, RestartNopersist, RestartAof, Eviction, Failover,
       QuorumRestart, ClockSkew, TermIgnored, KillNxlock, Replace, EtcdLeaderKill,
       EtcdQuorumLoss, EtcdBlindDelete, EtcdWaitersFailover]
BY_NAME = {s.name: s for s in ALL}
