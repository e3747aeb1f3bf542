"""The real servers a scenario runs against: redis-server on loopback (or on a veth address
the scenario made), restartable on its port, and a Sentinel deployment (one master, two
replicas, three Sentinels). Each is started and stopped by its own pid (processes.py).
"""
import os
import shutil
import socket
import tempfile
import time

import processes

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_SENTINEL = shutil.which("redis-sentinel") or "/usr/bin/redis-sentinel"
MASTER_NAME = "nemesis"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(port, *args, host="127.0.0.1", timeout=3.0):
    """One Redis command over a fresh connection; the reply as text (simple parse), or
    None if the server did not answer within `timeout`."""
    parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    request = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(request)
            reply = b""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
                if _complete(reply):
                    return reply.decode(errors="replace")
    except OSError:
        return None
    return None


def _complete(reply):
    """True once `reply` holds one whole RESP reply (good enough for the replies used here)."""
    if reply.startswith((b"+", b"-", b":")):
        return reply.endswith(b"\r\n")
    if reply.startswith(b"$"):
        head, _, rest = reply.partition(b"\r\n")
        size = int(head[1:] or b"0")
        return size < 0 or len(rest) >= size + 2
    if reply.startswith(b"*"):
        return reply.endswith(b"\r\n") and reply.count(b"\r\n") >= 1 + 2 * int(
            reply.split(b"\r\n", 1)[0][1:] or b"0")
    return False


def wait_until(condition, timeout, interval=0.05):
    """Polls `condition` until true or `timeout` seconds pass (or the run is aborted);
    its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not processes.aborting.is_set():
        if condition():
            return True
        time.sleep(interval)  # the poll's interval: `timeout` bounds the wait
    return condition()


class Redis:
    """A redis-server on 127.0.0.1:port (and `extra_bind` addresses), restartable on the
    same port and data directory. `options` are extra command-line options."""

    def __init__(self, options=(), extra_bind=(), name="redis"):
        self.dir = tempfile.mkdtemp(prefix="nxlock-nemesis-%s-" % name)
        self.options = list(options)
        self.bind = ["127.0.0.1", *extra_bind]
        self.process = None
        for _ in range(5):
            self.port = free_port()
            if self.start():
                return
            self.kill()
        if processes.aborting.is_set():
            shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError("redis-server did not start; see " + self.dir)

    def url(self, host="127.0.0.1"):
        return "redis://%s:%d" % (host, self.port)

    def start(self):
        """Starts the server; True once it answers PING (bounded)."""
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", *self.bind,
                "--save", "", "--daemonize", "no", "--dir", self.dir,
                "--logfile", os.path.join(self.dir, "redis.log"), *self.options]
        self.process = processes.start(args)
        return wait_until(lambda: self.process.poll() is not None or self.ping(), 10) and \
            self.process.poll() is None

    def ping(self):
        return (command(self.port, "PING", timeout=0.5) or "").startswith("+PONG")

    def cli(self, *args, timeout=3.0):
        return command(self.port, *args, timeout=timeout)

    def kill(self):
        """SIGKILL: a crash; nothing is flushed that was not already."""
        if self.process is not None:
            processes.kill_tree(self.process)

    def terminate(self):
        """SIGTERM: a clean shutdown (it finishes its AOF if it has one)."""
        if self.process is not None:
            processes.stop(self.process, timeout=10)

    def restart(self, crash=False):
        """Stops (SIGKILL if `crash`, else SIGTERM) and starts again on the same port."""
        if crash:
            self.kill()
        else:
            self.terminate()
        if not self.start():
            raise RuntimeError("redis-server did not come back; see " + self.dir)

    def pause(self):
        processes.pause([self.process.pid])

    def resume(self):
        processes.resume([self.process.pid])

    def close(self):
        self.terminate()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sentinels:
    """One master, two replicas and three Sentinels (quorum 2) watching them, fast settings."""

    def __init__(self):
        self.nodes = []
        self.sentinels = []
        self.last_reply = None  # the last answer to SENTINEL FAILOVER
        self.dir = tempfile.mkdtemp(prefix="nxlock-nemesis-sentinels-")
        try:
            master = Redis(name="master")
            self.nodes.append(master)
            for i in range(2):
                self.nodes.append(Redis(["--replicaof", "127.0.0.1", str(master.port)],
                                        name="replica%d" % i))
            for i in range(3):
                self.sentinels.append(self._sentinel(i, master.port))
            if not self.settled(timeout=30):
                raise RuntimeError("the Sentinel deployment did not settle; see " + self.dir)
        except BaseException:
            self.close()
            raise

    def _sentinel(self, index, master_port):
        for _ in range(5):
            port = free_port()
            config = os.path.join(self.dir, "sentinel%d.conf" % index)
            with open(config, "w") as f:  # Sentinel rewrites it: it must be writable
                f.write("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile %s\n"
                        % (port, self.dir, os.path.join(self.dir, "sentinel%d.log" % index)))
                f.write("sentinel monitor %s 127.0.0.1 %d 2\n" % (MASTER_NAME, master_port))
                f.write("sentinel down-after-milliseconds %s 1000\n" % MASTER_NAME)
                f.write("sentinel failover-timeout %s 5000\n" % MASTER_NAME)
                f.write("sentinel parallel-syncs %s 2\n" % MASTER_NAME)
            process = processes.start([REDIS_SENTINEL, config])
            if wait_until(lambda: process.poll() is not None or
                          (command(port, "PING", timeout=0.5) or "").startswith("+PONG"), 10) \
                    and process.poll() is None:
                return (process, port)
            processes.kill_tree(process)
        raise RuntimeError("redis-sentinel did not start; see " + self.dir)

    @property
    def url(self):
        hosts = ",".join("127.0.0.1:%d" % port for _, port in self.sentinels)
        return "redis+sentinel://%s/%s" % (hosts, MASTER_NAME)

    def master_port(self, sentinel=0):
        reply = command(self.sentinels[sentinel][1], "SENTINEL", "get-master-addr-by-name",
                        MASTER_NAME) or ""
        lines = reply.split("\r\n")
        return int(lines[4]) if len(lines) >= 5 and lines[4].isdigit() else None

    def settled(self, timeout):
        """True once every Sentinel names one master that says it is master with both
        replicas online and in sync, and each Sentinel knows the two others."""
        def check():
            ports = {self.master_port(i) for i in range(len(self.sentinels))}
            if len(ports) != 1 or None in ports:
                return False
            info = command(ports.pop(), "INFO", "replication") or ""
            if "role:master" not in info or "connected_slaves:2" not in info:
                return False
            if info.count("state=online") != 2:
                return False
            for _, port in self.sentinels:
                sentinel_info = command(port, "SENTINEL", "master", MASTER_NAME) or ""
                if "num-other-sentinels\r\n$1\r\n2" not in sentinel_info:
                    return False
            return True
        return wait_until(check, timeout, interval=0.2)

    def failover(self, timeout=15):
        """SENTINEL FAILOVER (retried while one is in progress); the new master's port, or None."""
        before = self.master_port()
        deadline = time.monotonic() + timeout

        def started():
            reply = command(self.sentinels[0][1], "SENTINEL", "FAILOVER", MASTER_NAME) or ""
            self.last_reply = reply.strip()
            return reply.startswith("+OK")
        if not wait_until(started, timeout, interval=0.2):
            return None
        if not wait_until(lambda: self.master_port() not in (None, before),
                          max(0.0, deadline - time.monotonic())):
            return None
        return self.master_port()

    def close(self):
        for process, _ in self.sentinels:
            processes.stop(process)
        for node in self.nodes:
            node.close()
        shutil.rmtree(self.dir, ignore_errors=True)


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
