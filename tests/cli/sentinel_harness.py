"""A Sentinel deployment for the tests: a master, replicas and Sentinels on free loopback ports.

Fast failover settings (down after 1 s, failover-timeout 3 s, one replica
re-syncs at a time: production's defaults are 30 s, 180 s and 1, scaled down so
a test takes seconds). Every process is started here and stopped by its pid
(SIGKILL through PR_SET_PDEATHSIG too if the test dies).
"""
import os
import shutil
import subprocess
import tempfile

import harness
from harness import REDIS_CLI, RedisServer, dying_with_parent, free_port, stop_server

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

    def __init__(self, master_port, password=None, quorum=1):
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
                f.write("sentinel failover-timeout %s 3000\n" % MASTER_NAME)
                f.write("sentinel parallel-syncs %s 1\n" % MASTER_NAME)
                if password:
                    f.write("requirepass %s\n" % password)
            self.process = subprocess.Popen(dying_with_parent([REDIS_SENTINEL, config]),
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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

    def __init__(self, replicas=1, sentinel_password=None, sentinels=1):
        self.sentinel_password = sentinel_password
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
        return Sentinel(master_port, password=self.sentinel_password, quorum=self.quorum)

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

    def stop(self):
        for process in [*self.sentinels, *self.replicas, self.master]:
            if process is not None:
                process.stop()
