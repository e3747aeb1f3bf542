"""Redis connections: a whole-exchange deadline against a trickling server, and the statuses of server error replies."""
import os
import socket
import subprocess
import threading
import time
import unittest

from harness import NxlockTestCase, RedisServer, free_port, wait_for


class TricklingServer:
    """A listener on 127.0.0.1 that answers any request with a bulk reply, one byte every 1.5 s."""

    def __init__(self, interval=1.5):
        self.interval = interval
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn):
        with conn:
            try:
                conn.recv(4096)
                for byte in b"$5\r\nhello\r\n":
                    if self.stopped.wait(self.interval):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                pass

    def stop(self):
        self.stopped.set()
        self.sock.close()


class Deadlines(NxlockTestCase):
    def test_a_trickled_reply_times_out_as_a_whole(self):
        server = TricklingServer()
        self.addCleanup(server.stop)
        url = "redis://127.0.0.1:%d" % server.port
        started = time.monotonic()
        r = self.nx("-u", url, "--io-timeout", "2", "get", "k")
        elapsed = time.monotonic() - started
        self.assertOneLineError(r, 69, url, "timed out after 2s")
        # A per-read timeout would take 11 bytes x 1.5 s; the exchange has one deadline.
        self.assertLess(elapsed, 6)

    def full_listener(self):
        """A loopback listener whose accept queue is full (one pending connection
        fills a backlog of 0; a second one's SYN is dropped already), and its port."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        self.addCleanup(listener.close)
        address = listener.getsockname()
        for _ in range(2):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(address)
            self.addCleanup(filler.close)
        return listener, address[1]

    def test_a_full_accept_queue_times_out_connecting(self):
        # The kernel drops the SYNs of a listener whose accept queue is full, as
        # a burst of clients overflows a server's tcp-backlog: the message says
        # it was the connect that timed out, not a reply.
        _, port = self.full_listener()  # never accepts
        url = "redis://127.0.0.1:%d" % port
        started = time.monotonic()
        r = self.nx("-u", url, "--io-timeout", "0.5", "get", "k")
        self.assertOneLineError(r, 69, url, "connect timed out after 0.5s")
        self.assertLess(time.monotonic() - started, 4)

    def serve_once_room_is_made(self, listener, after):
        """After `after` seconds, accepts the connection that fills `listener`'s
        queue, then the next one, which it answers with a nil reply."""
        def serve():
            time.sleep(after)  # the fault itself: the queue is served only after `after` s
            filler, _ = listener.accept()
            self.addCleanup(filler.close)
            conn, _ = listener.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"$-1\r\n")
        threading.Thread(target=serve, daemon=True).start()

    def test_a_connect_dropped_by_a_full_accept_queue_is_tried_again(self):
        # While a listener's accept queue is full (a burst of clients against
        # the server's tcp-backlog), the kernel drops a SYN and sends it again
        # only 1 s later, then 3 s: past this --io-timeout. A new attempt every
        # quarter second connects once the queue has room, at 1.2 s.
        listener, port = self.full_listener()
        self.serve_once_room_is_made(listener, 1.2)
        r = self.nx("-u", "redis://127.0.0.1:%d" % port, "--io-timeout", "2.5", "get", "k")
        self.assertEqual(r.returncode, 1, r.stderr)  # no such key: the server answered

    def test_a_full_unix_socket_queue_is_tried_again(self):
        # A unix socket's full queue refuses at once (EAGAIN): tried again too.
        path = os.path.join(self.tmp, "full.sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(0)
        self.addCleanup(listener.close)
        filler = socket.socket(socket.AF_UNIX)
        filler.setblocking(False)
        filler.connect_ex(path)
        self.addCleanup(filler.close)
        self.serve_once_room_is_made(listener, 0.6)
        r = self.nx("-u", "unix://" + path, "--io-timeout", "2", "get", "k")
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_a_silent_server_times_out(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts (in the kernel) and never answers
        self.addCleanup(listener.close)
        url = "redis://127.0.0.1:%d" % listener.getsockname()[1]
        started = time.monotonic()
        r = self.nx("-u", url, "--io-timeout", "0.5", "get", "k")
        self.assertOneLineError(r, 69, url, "timed out after 0.5s")
        self.assertLess(time.monotonic() - started, 4)

    def test_refused_is_69(self):
        url = "redis://127.0.0.1:%d" % free_port()
        self.assertOneLineError(self.nx("-u", url, "get", "k"), 69, url, "refused")


class Addresses(NxlockTestCase):
    def test_ipv6_and_a_name_that_resolves_to_both_families(self):
        server = RedisServer(extra=["--bind", "127.0.0.1", "::1"])
        self.addCleanup(server.stop)
        r = self.nx("-u", "redis://[::1]:%d" % server.port, "setnx", "k", "v6")
        self.assertEqual((r.returncode, r.stdout), (0, b"1\n"), r.stderr)
        r = self.nx("-u", "redis://localhost:%d" % server.port, "get", "k")
        self.assertEqual((r.returncode, r.stdout), (0, b"v6\n"), r.stderr)


class ServerErrors(NxlockTestCase):
    """Every error reply a server gives is its EXIT STATUS (man page), never 70."""

    def setUp(self):
        super().setUp()
        self.server = RedisServer(extra=["--user", "reader", "on", ">pw", "~*", "+get", "+auth"])
        self.addCleanup(self.server.stop)
        self.url = self.server.url

    def test_oom_is_69(self):
        self.server.cli("CONFIG", "SET", "maxmemory", "1")
        self.server.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        self.assertOneLineError(self.nx("-u", self.url, "setnx", "k", "v"), 69, "OOM")

    def test_readonly_and_masterdown_are_69(self):
        # A replica of a master that is not there: it refuses writes, and with
        # replica-serve-stale-data off it refuses reads too.
        self.server.cli("REPLICAOF", "127.0.0.1", str(free_port()))
        self.assertOneLineError(self.nx("-u", self.url, "setnx", "k", "v"), 69, "READONLY")
        self.server.cli("CONFIG", "SET", "replica-serve-stale-data", "no")
        self.assertOneLineError(self.nx("-u", self.url, "get", "k"), 69, "MASTERDOWN")

    def test_busy_is_69(self):
        self.server.cli("CONFIG", "SET", "busy-reply-threshold", "50")
        script = subprocess.Popen(["redis-cli", "-p", str(self.server.port), "EVAL",
                                   "while true do end", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(script.wait, 10)
        self.addCleanup(lambda: subprocess.run(
            ["redis-cli", "-p", str(self.server.port), "SCRIPT", "KILL"], capture_output=True,
            timeout=10))
        answers = []

        def busy():
            answers.append(self.nx("-u", self.url, "get", "k"))
            return b"BUSY" in answers[-1].stderr
        wait_for(busy, interval=0.05)
        self.assertOneLineError(answers[-1], 69, "BUSY")

    def test_noperm_is_77_and_auth_failure_is_77(self):
        reader = "redis://reader:pw@127.0.0.1:%d" % self.server.port
        self.assertEqual(self.nx("-u", reader, "get", "k").returncode, 1)
        self.assertOneLineError(self.nx("-u", reader, "setnx", "k", "v"), 77, "NOPERM")
        bad = "redis://reader:wrong@127.0.0.1:%d" % self.server.port
        r = self.nx("-u", bad, "get", "k")
        self.assertOneLineError(r, 77, "authentication failed")
        self.assertNotIn(b"wrong", r.stderr)

    def test_wrongtype_is_65(self):
        self.server.cli("RPUSH", "k", "x")
        self.assertOneLineError(self.nx("-u", self.url, "get", "k"), 65, "WRONGTYPE")


if __name__ == "__main__":
    unittest.main()
