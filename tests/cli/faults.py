"""Fault tools for the tests: a redis-server that can be stopped and started on its port
(servers.RedisServer's), a loopback TCP proxy that can cut a client off from the server (a partition), and the
embedded store's: nxlock under a wrong wall clock (libfaketime), a holder stopped
mid-hold, keys in a chosen stripe (FileSafetyCase).

Both stop only what they started, by pid or by their own sockets.
"""
import json
import os
import socket
import subprocess
import threading
import time

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase, bucket_of, read, wait_for
from servers import RedisServer, stop_server


class RestartableRedis(RedisServer):
    """servers.RedisServer whose stop() keeps its port and data dir, so that start() brings
    it back on them (close() removes them)."""

    def __init__(self, *extra):
        super().__init__(extra=extra)

    def start(self):
        """Starts the server again on self.port; True once it answers PING."""
        return self._start()

    def stop(self, sig=None):
        """Stops the server (SIGTERM: it finishes its AOF first, or `sig`) and waits for it."""
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
        super().restart()
        return time.monotonic()

    def get(self, key):
        """GET through redis-cli; None if the server does not answer at once."""
        try:
            return self.cli("GET", key, timeout=2).strip()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return None

    def close(self):
        stop_server(self.process, self.dir)


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


# FAKETIME_DONT_FAKE_MONOTONIC: only the wall clock is off, as after a clock step.
FAKE_ENV = {"FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def key_in_stripe(stripe, prefix):
    """A key whose bucket lies in stripe directory `stripe` (two hex digits)."""
    for i in range(100000):
        key = "%s-%d" % (prefix, i)
        if bucket_of(key)[0] == stripe:
            return key
    raise AssertionError("no key found for stripe " + stripe)


class FileSafetyCase(NxlockTestCase):
    def faked(self, offset, *args, **kwargs):
        """nxlock under libfaketime, its wall clock `offset` ('+1h', '-2h') off."""
        asan = ":".join(filter(None, [self.env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        env = dict(self.env, ASAN_OPTIONS=asan, **FAKE_ENV)
        return subprocess.run(["faketime", "-f", offset, BIN, *args], capture_output=True,
                              env=env, timeout=kwargs.get("timeout", COMMAND_TIMEOUT))

    def lock_json(self, *args):
        r = self.nx("--json", "lock", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def start_run_locked(self, key, *options):
        """A run-locked whose job says it started, then sleeps; (process, job pid file)."""
        started = os.path.join(self.tmp, "started-" + key)
        p = self.popen("run-locked", *options, key, "sh", "-c",
                       'echo $$ > "$0"; exec sleep 60', started,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(self.stop, p)
        self.assertTrue(wait_for(lambda: read(started).strip() != "", timeout=20),
                        "the job of run-locked %s did not start" % key)
        # Its holder record is written after the job starts: a SIGSTOP before
        # that write ended would stop it holding the store's stripe lock.
        self.assertTrue(wait_for(lambda: b"holder:" in self.nx("status", key).stdout, timeout=20))
        time.sleep(0.2)  # a bound: that write has ended by then (nothing shows its end)
        return p

    @staticmethod
    def stop(process):
        """Kills a process this test started (if it still runs) and reaps it."""
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=COMMAND_TIMEOUT)
