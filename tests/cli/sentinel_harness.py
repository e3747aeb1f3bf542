"""A Sentinel deployment for the tests: a master, replicas and Sentinels on free loopback ports.

Fast failover settings (down after 1 s, failover-timeout 3 s, one replica
re-syncs at a time: production's defaults are 30 s, 180 s and 1, scaled down so
a test takes seconds). Every process is started here and stopped by its pid
(SIGKILL through PR_SET_PDEATHSIG too if the test dies). failover_round: a master
SIGKILLed under a running job, as test_sentinel.py and test_sentinel_tls.py both run it.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import harness
from harness import trace_shows_release
from servers import REDIS_CLI, RedisServer, free_port, start_server, stop_server

REDIS_SENTINEL = shutil.which("redis-sentinel") or "/usr/bin/redis-sentinel"
MASTER_NAME = "mymaster"
# A replica that re-syncs in full from a new master (it had writes the new one
# never got) starts at once: Redis 7's default waits 5 s for more replicas to
# share the transfer, 5 s in which WAIT on the new master confirms nothing.
REPLICATION = ["--repl-diskless-sync-delay", "0"]


def cli(port, *args, timeout=5):
    """redis-cli against 127.0.0.1:port; stdout as text ("" if it could not run)."""
    try:
        return subprocess.run([REDIS_CLI, "-p", str(port), *args], capture_output=True,
                              timeout=timeout).stdout.decode()
    except subprocess.TimeoutExpired:
        return ""


def wait_for(condition, timeout, what):
    if not harness.wait_for(condition, timeout, interval=0.05):
        raise AssertionError("timed out waiting for " + what)


class Sentinel:
    """One redis-sentinel monitoring `master_port` as MASTER_NAME."""

    def __init__(self, master_port, password=None, quorum=1, failover_timeout=3000,
                 parallel_syncs=1):
        self.dir = tempfile.mkdtemp(prefix="nxlock-sentinel-")
        self.password = password
        self.process = None
        for _ in range(5):
            self.port = free_port()
            config = os.path.join(self.dir, "sentinel.conf")
            with open(config, "w") as f:  # Sentinel rewrites it: it must be writable
                f.write(self._listen_config())
                f.write("bind 127.0.0.1\ndaemonize no\ndir %s\nlogfile %s\n"
                        % (self.dir, os.path.join(self.dir, "sentinel.log")))
                f.write("sentinel monitor %s 127.0.0.1 %d %d\n"
                        % (MASTER_NAME, master_port, quorum))
                f.write("sentinel down-after-milliseconds %s 1000\n" % MASTER_NAME)
                f.write("sentinel failover-timeout %s %d\n" % (MASTER_NAME, failover_timeout))
                f.write("sentinel parallel-syncs %s %d\n" % (MASTER_NAME, parallel_syncs))
                if password:
                    f.write("requirepass %s\n" % password)
            self.process = start_server([REDIS_SENTINEL, config])
            try:
                wait_for(lambda: self.process.poll() is not None or "PONG" in self.cli("PING"),
                         10, "redis-sentinel to start")
            except AssertionError:
                pass
            if self.process.poll() is None:
                return
        raise RuntimeError("redis-sentinel did not start; see " + self.dir)

    def _listen_config(self):
        """The configuration lines that say how it listens (a subclass may use TLS)."""
        return "port %d\n" % self.port

    def cli(self, *args):
        extra = ["-a", self.password, "--no-auth-warning"] if self.password else []
        return cli(self.port, *extra, *args)

    def master_port(self):
        lines = self.cli("SENTINEL", "get-master-addr-by-name", MASTER_NAME).split()
        return int(lines[1]) if len(lines) == 2 else None

    def stop(self):
        stop_server(self.process, self.dir)


class Deployment:
    """A master, `replicas` replicas of it and a Sentinel that watches them, ready for a failover."""

    def __init__(self, replicas=1, sentinel_password=None, sentinels=1, failover_timeout=3000,
                 parallel_syncs=1):
        """`failover_timeout` (ms) and `parallel_syncs`: the Sentinels' settings (the
        nemesis's failover lets both replicas re-sync at once, in 5 s)."""
        self.sentinel_password = sentinel_password
        self.sentinel_settings = {"failover_timeout": failover_timeout,
                                  "parallel_syncs": parallel_syncs}
        self.last_reply = None  # the last answer to SENTINEL FAILOVER (failover())
        self.master = self._node()
        self.replicas = []
        self.sentinels = []
        self.quorum = sentinels // 2 + 1  # a majority must agree the master is down
        try:
            for _ in range(replicas):
                self.replicas.append(self._node(replica_of=self.master.port))
            for replica in self.replicas:
                wait_for(lambda: "master_link_status:up" in self.cli(replica.port, "INFO",
                                                                     "replication"),
                         15, "the replica to sync")
            for _ in range(sentinels):
                self.sentinels.append(self._sentinel(self.master.port))
            # A failover needs replicas the Sentinels know of (they learn them
            # from INFO), and a majority of Sentinels that know each other (they
            # learn it from hello messages on the master).
            for sentinel in self.sentinels:
                for replica in self.replicas:
                    wait_for(lambda: ("%d" % replica.port) in sentinel.cli(
                        "SENTINEL", "replicas", MASTER_NAME), 15,
                        "the Sentinel to see the replica")
                wait_for(lambda: sentinel.cli("SENTINEL", "sentinels", MASTER_NAME).count(
                    "runid") >= sentinels - 1, 15, "the Sentinels to see each other")
        except BaseException:
            self.stop()
            raise

    def _node(self, replica_of=None):
        """One server of the deployment (subclasses: over TLS)."""
        extra = ["--replicaof", "127.0.0.1", str(replica_of)] if replica_of else []
        return RedisServer(extra=REPLICATION + extra)

    def _sentinel(self, master_port):
        return Sentinel(master_port, password=self.sentinel_password, quorum=self.quorum,
                        **self.sentinel_settings)

    @property
    def sentinel(self):
        return self.sentinels[0] if self.sentinels else None

    @property
    def replica(self):
        return self.replicas[0]

    def url(self, sentinels=None, scheme="redis+sentinel"):
        hosts = sentinels or ["127.0.0.1:%d" % s.port for s in self.sentinels]
        return "%s://%s/%s" % (scheme, ",".join(hosts), MASTER_NAME)

    def cli(self, port, *args):
        """redis-cli against one of the deployment's servers ("" if it is down)."""
        return cli(port, *args)

    def master_port(self, sentinel=0):
        """The master's port as Sentinel `sentinel` names it (None if it names none)."""
        return self.sentinels[sentinel].master_port()

    def settled(self, timeout):
        """True once every Sentinel names one master that says it is master with every
        replica online, and each Sentinel knows all the others (bounded by `timeout`)."""
        def check():
            ports = {sentinel.master_port() for sentinel in self.sentinels}
            if len(ports) != 1 or None in ports:
                return False
            info = self.cli(ports.pop(), "INFO", "replication")
            if "role:master" not in info or \
                    "connected_slaves:%d" % len(self.replicas) not in info or \
                    info.count("state=online") != len(self.replicas):
                return False
            for sentinel in self.sentinels:
                fields = sentinel.cli("SENTINEL", "master", MASTER_NAME).split()
                known = dict(zip(fields[::2], fields[1::2]))
                if known.get("num-other-sentinels") != str(len(self.sentinels) - 1):
                    return False
            return True
        return harness.wait_for(check, timeout, interval=0.2)

    def failover(self, timeout=15):
        """SENTINEL FAILOVER (retried while one is in progress, its last answer in
        last_reply); the new master's port once the first Sentinel names it, or None
        if none within `timeout` seconds."""
        before = self.master_port()
        deadline = time.monotonic() + timeout

        def started():
            self.last_reply = self.sentinel.cli("SENTINEL", "FAILOVER", MASTER_NAME).strip()
            return self.last_reply == "OK"
        if not harness.wait_for(started, timeout, interval=0.2):
            return None
        if not harness.wait_for(lambda: self.master_port() not in (None, before),
                                max(0.0, deadline - time.monotonic())):
            return None
        return self.master_port()

    def stop(self):
        for process in [*self.sentinels, *self.replicas, self.master]:
            if process is not None:
                process.stop()


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def failover_round(test, extra_args=()):
    """SIGKILLs the master while run-locked holds a lock for a 9 s job.

    Meanwhile other clients try to take the lock every 0.2 s. Returns (seconds
    from the kill until a renewal landed on the new master, how many of those
    other clients got the lock while the job held it: double holders).
    """
    d = test.deployment
    old_port = d.master.port
    by_port = {r.port: r for r in d.replicas}
    job_err = os.path.join(test.tmp, "job.err")
    with open(job_err, "wb") as err:
        job = test.popen("-u", test.url, *extra_args, "-v", "run-locked", "--ttl", "8", "job",
                         "sleep", "9", stderr=err)
    doubles = 0
    try:
        # Acquired, as the job's trace says: the key on the master is not enough,
        # since with --replicas the SETNX counts only once a replica confirmed it.
        wait_for(lambda: re.search(r"SETNX job \d+ → 1", read_text(job_err)), 10, "the lock")
        if not extra_args:
            # Without --replicas nothing waits for the replica: give it the write
            # (asynchronous replication is what --replicas is there for).
            wait_for(lambda: all(d.cli(r.port, "EXISTS", "job").strip() == "1"
                                 for r in d.replicas), 10, "the replicas to have the lock")
        # The value before the kill: any other value on a master Sentinel names
        # after it is a renewal that followed the failover.
        taken = d.cli(old_port, "GET", "job").strip()
        killed_at = time.monotonic()
        d.master.process.send_signal(signal.SIGKILL)
        d.master.process.wait()
        masters = []

        def failed_over():
            nonlocal doubles
            port = d.sentinel.master_port()
            if port in by_port:
                masters.append(by_port[port])
                return True
            taker = test.nx("-u", test.url, *extra_args, "--io-timeout", "0.5", "lock", "-n",
                            "--ttl", "30", "job")
            doubles += taker.returncode == 0
            return False
        harness.wait_for(failed_over, 30, interval=0.2)
        new_master = masters[0] if masters else None
        test.assertIsNotNone(new_master, "no failover within 30 s")
        failover_done = time.monotonic() - killed_at
        first = d.cli(new_master.port, "GET", "job").strip()
        test.assertNotEqual(first, "", "the new master does not have the lock")
        # Follow: a renewal rewrites the lock's value on the master Sentinel names
        # (a loaded machine may see a second failover, to a master with no replica
        # left to confirm renewals with: the first new master is where they landed).
        followed = time.monotonic() - killed_at if first != taken else None
        late_taker = None  # a taker that got the lock just after the job released it

        def follow():
            nonlocal doubles, followed, late_taker
            if job.poll() is not None:
                return True
            current = by_port.get(d.sentinel.master_port()) or new_master
            if followed is None and d.cli(current.port, "GET", "job").strip() not in ("", taken):
                followed = time.monotonic() - killed_at
            taker = test.nx("-u", test.url, *extra_args, "--io-timeout", "0.5", "lock", "-n",
                            "--ttl", "30", "job")
            if taker.returncode == 0 and job.poll() is None:
                # Between run-locked's release and its exit a taker may get the
                # lock: that is no double holder if the job's trace shows the
                # release (written before it exits).
                job.wait(timeout=30)
            if job.poll() is None or (taker.returncode == 0 and not trace_shows_release(job_err, "job")):
                doubles += taker.returncode == 0
                test.assertEqual(taker.returncode, 75, taker.stderr)
            elif taker.returncode == 0:
                late_taker = taker.stdout.decode().strip()
            return False
        harness.wait_for(follow, max(0.0, 30 - (time.monotonic() - killed_at)), interval=0.2)
        job.wait(timeout=30)
        err = read_text(job_err)
        test.assertEqual(job.returncode, 0, err)
        test.assertIsNotNone(followed, "no renewal on the new master: " + err)
        # Released on the master at the end: gone, or taken by a taker since. A
        # loaded machine may see a second failover (the promoted replica slow to
        # answer, or the first one aborted): the master is the one Sentinel names
        # now, and the first one promoted may be left with its stale copy.
        final_master = by_port.get(d.sentinel.master_port())
        test.assertIsNotNone(final_master, "Sentinel names no replica as master")
        test.assertIn(d.cli(final_master.port, "GET", "job").strip(), ("", late_taker))
        sys.stderr.write("\n[failover%s] Sentinel switched %.2fs after the kill, run-locked "
                         "renewed on the new master %.2fs after it; double holders: %d\n"
                         % (" " + " ".join(extra_args) if extra_args else "", failover_done,
                            followed, doubles))
        return followed, doubles
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
