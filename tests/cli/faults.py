"""Fault tools for the tests: a redis-server that can be restarted on its port, and a
loopback TCP proxy that can cut a client off from the server (a partition).

Both stop only what they started, by pid or by their own sockets.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from harness import (COMMAND_TIMEOUT, REDIS_CLI, REDIS_SERVER, dying_with_parent, free_port,
                     wait_answering)


class RestartableRedis:
    """A redis-server on 127.0.0.1 that keeps its port and data dir across restarts."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="nxlock-fault-redis-")
        self.extra = list(extra)
        self.process = None
        self.port = None
        for _ in range(5):
            self.port = free_port()
            if self.start():
                return
        raise RuntimeError("redis-server did not start; see " + self.dir)

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self):
        """Starts the server on self.port; True once it answers PING."""
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--daemonize", "no", "--dir", self.dir,
                "--logfile", os.path.join(self.dir, "redis.log"), *self.extra]
        self.process = subprocess.Popen(dying_with_parent(args), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        return wait_answering(self.process, ("127.0.0.1", self.port))

    def stop(self, sig=None):
        """Stops the server (SIGTERM: it finishes its AOF first) and waits for it."""
        if self.process and self.process.poll() is None:
            if sig is None:
                self.process.terminate()
            else:
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self):
        """Stops and starts again on the same port; returns the monotonic time it answered."""
        self.stop()
        if not self.start():
            raise RuntimeError("redis-server did not come back; see " + self.dir)
        return time.monotonic()

    def cli(self, *args, timeout=COMMAND_TIMEOUT):
        return subprocess.run([REDIS_CLI, "-p", str(self.port), *args], capture_output=True,
                              check=True, timeout=timeout).stdout

    def get(self, key):
        """GET through redis-cli; None if the server does not answer at once."""
        try:
            return self.cli("GET", key, timeout=2).strip()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class ForwardingProxy:
    """Forwards 127.0.0.1:port to a server, byte for byte; a subclass decides what
    passes (accepting(), forward()) to make the fault it stands for."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = threading.Event()
        self.sockets = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def accepting(self):
        """False: a new connection is accepted and left silent."""
        return True

    def forward(self, data, from_client):
        """False: `data` is swallowed. May also hold it back for a while."""
        return True

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            if not self.accepting():
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self.sockets.append(server)
            for a, b, from_client in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pipe, args=(a, b, from_client), daemon=True).start()

    def _pipe(self, source, sink, from_client):
        while not self.closed.is_set():
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if not self.forward(data, from_client):
                continue
            try:
                sink.sendall(data)
            except OSError:
                return

    def close(self):
        self.closed.set()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class PartitionProxy(ForwardingProxy):
    """Forwards until partition() is called; from then on it holds every byte in both
    directions and forwards nothing (new connections are accepted and left silent),
    as a network partition looks to a client."""

    def __init__(self, target_port):
        self.cut = threading.Event()
        super().__init__(target_port)

    def partition(self):
        self.cut.set()

    def accepting(self):
        return not self.cut.is_set()

    def forward(self, data, from_client):
        return not self.cut.is_set()  # swallowed: the partition drops traffic silently


class DelayedTimeProxy(ForwardingProxy):
    """Holds the first TIME command back for `delay` seconds before passing it on, as
    dropped packets and a TCP retransmit would: the server then reads its clock at
    the end of the client's exchange, not in its middle."""

    def __init__(self, target_port, delay):
        self.delay = delay
        self.delayed = False
        super().__init__(target_port)

    def forward(self, data, from_client):
        if from_client and not self.delayed and b"$4\r\nTIME\r\n" in data:
            self.delayed = True
            time.sleep(self.delay)  # the fault itself: TIME's answer held back this long
        return True
