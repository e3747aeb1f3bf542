"""-v traces each store step once, in the same form on every backend, and every
message stays on one line whatever bytes a key, value or path holds."""
import json
import os
import re
import socket
import subprocess
import threading
import unittest

from harness import BIN, NxlockTestCase, RedisServer, side_key, wait_for

# A trace line of a store step: "nxlock: SETNX key value → 1".
STEP = re.compile(r"^nxlock: (TIME|SETNX|GET|GETSET|SET|DEL|DEL-IF-EQUAL|SET-IF-EQUAL)( |$)")
AWKWARD_KEY = b"a\nb\r\x1b[2J\xff"
AWKWARD_SHOWN = "a\\x0ab\\x0d\\x1b[2J\\xff"


def lines_of(stderr):
    return stderr.decode("utf-8", errors="strict").splitlines()


def steps(stderr, value):
    """The step lines of a trace, with the lock value and clock readings made generic."""
    found = []
    for line in lines_of(stderr):
        if STEP.match(line):
            line = re.sub(r"TIME → \d+\.\d{6}", "TIME → T", line)
            line = re.sub(r"(INCR \S+ → |= )\d+", r"\1N", line)  # a fencing token
            found.append(line.replace(value, "V"))
    return found


class TraceEachStepOnce(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_busy_lock_traces_each_step_once_on_every_backend(self):
        seen = {}
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                value = self.nx(*u, "lock", "-t", "60", "k").stdout.decode().strip()
                r = self.nx(*u, "-v", "lock", "-n", "k")
                self.assertEqual(r.returncode, 75, r.stderr)
                trace = steps(r.stderr, value)
                for step in ("SETNX k ", "GET k → "):
                    self.assertEqual(len([s for s in trace if s.startswith("nxlock: " + step)]),
                                     1, r.stderr.decode())
                # A step is traced once: not again by the backend in its own words.
                for line in lines_of(r.stderr):
                    self.assertNotRegex(line, r"redis: (SETNX|GET|EVAL|EVALSHA) ")
                self.assertEqual(len(trace), len(set(trace)), r.stderr.decode())
                seen[backend.name] = trace
        # The same steps in the same words, whatever the backend. Unix times go,
        # the holder's value (V) among them: the runs may straddle a second, and
        # the waiter's value then differs from the holder's on one backend only.
        def words(trace):
            return [re.sub(r"\b(\d{9,}|V)\b", "T", step) for step in trace]
        self.assertEqual(words(seen["redis"]), words(seen["file"]))
        self.assertEqual(words(seen["unix"]), words(seen["file"]))

    def test_lock_and_unlock_trace_their_writes_once(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                r = self.nx(*u, "-v", "lock", "-t", "60", "k")
                self.assertEqual(r.returncode, 0, r.stderr)
                value = r.stdout.decode().strip()
                acquired = "nxlock: SETNX k V → 1, INCR {k}:fence:k → N"
                self.assertEqual(steps(r.stderr, value).count(acquired), 1,
                                 r.stderr.decode())
                r = self.nx(*u, "-v", "unlock", "k", value)
                self.assertEqual(r.returncode, 0, r.stderr)
                trace = steps(r.stderr, value)
                self.assertEqual(trace.count("nxlock: DEL-IF-EQUAL k V → 1"), 1, r.stderr.decode())
                for line in lines_of(r.stderr):
                    self.assertNotRegex(line, r"redis: (EVAL|EVALSHA|DEL|PUBLISH) ")


class OneLinePerMessage(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def assertAllLinesAreNxlocks(self, result):
        err = result.stderr.decode("utf-8", errors="strict")  # escaped: valid UTF-8 too
        for line in err.splitlines():
            self.assertTrue(line.startswith("nxlock: "), err)

    def test_a_key_with_a_newline_gives_one_line_messages_errors_and_traces(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                r = self.nx(*u, "lock", "-t", "60", AWKWARD_KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                value = r.stdout.strip()
                # The busy message (its key, and the holder's command).
                r = self.nx(*u, "lock", "-n", AWKWARD_KEY)
                self.assertOneLineError(r, 75, "lock '" + AWKWARD_SHOWN + "': busy")
                # Errors naming the key.
                r = self.nx(*u, "unlock", AWKWARD_KEY, "not-a-value\nsecond line")
                self.assertOneLineError(r, 64, AWKWARD_SHOWN, "'not-a-value\\x0asecond line'")
                r = self.nx(*u, "renew", AWKWARD_KEY, "1")
                self.assertOneLineError(r, 1, AWKWARD_SHOWN, "not renewed")
                # Traces: every line is one whole trace line.
                r = self.nx(*u, "-v", "lock", "-n", AWKWARD_KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertAllLinesAreNxlocks(r)
                self.assertIn("nxlock: SETNX " + AWKWARD_SHOWN + " ", r.stderr.decode())
                r = self.nx(*u, "-v", "unlock", AWKWARD_KEY, value)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertAllLinesAreNxlocks(r)
                # A value that is not a lock timestamp.
                self.nx(*u, "setnx", AWKWARD_KEY, b"data\nmore")
                r = self.nx(*u, "lock", "-n", AWKWARD_KEY)
                self.assertOneLineError(r, 65, AWKWARD_SHOWN, "'data\\x0amore'")
                self.nx(*u, "del", AWKWARD_KEY)

    def test_a_holder_command_with_a_newline_gives_a_one_line_busy_message(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                job = self.popen(*u, "run-locked", "-t", "60", "job", "sh", "-c",
                                 "sleep 30\n# second line", stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
                try:
                    # The holder's details are written just after its child starts,
                    # a moment after the lock itself: wait for them.
                    self.assertTrue(wait_for(lambda: b"holder: " in self.nx(
                        *u, "status", "job").stdout))
                    r = self.nx(*u, "lock", "-n", "job")
                    self.assertOneLineError(r, 75, "busy", "sleep 30\\x0a# second line")
                finally:
                    job.terminate()
                    job.wait(timeout=10)

    def test_a_store_path_with_a_newline_gives_one_line_errors(self):
        parent = os.path.join(self.tmp, "x\ny")
        os.mkdir(parent)
        not_a_store = os.path.join(parent, "store")
        with open(not_a_store, "w") as f:
            f.write("a file, not a directory\n")
        shown = not_a_store.replace("\n", "\\x0a")
        r = self.nx("-u", "file://" + not_a_store, "lock", "k")
        self.assertOneLineError(r, 65, shown, "not an nxlock store")
        env = dict(self.env, NXLOCK_STORE=not_a_store)
        r = self.nx("lock", "k", env=env)
        self.assertOneLineError(r, 65, shown, "not an nxlock store")
        r = self.nx("-v", "lock", "k", env=env)
        self.assertEqual(r.returncode, 65, r.stderr)
        self.assertAllLinesAreNxlocks(r)
        # A corrupt record inside a store whose path holds a newline.
        store = os.path.join(parent, "store2")
        u = ["-u", "file://" + store]
        self.assertEqual(self.nx(*u, "setnx", "k", "v").returncode, 0)
        data = os.path.join(store, "data")
        for stripe in os.listdir(data):
            for name in os.listdir(os.path.join(data, stripe)):
                with open(os.path.join(data, stripe, name), "r+b") as f:
                    f.write(b"XXXX")
        r = self.nx(*u, "get", "k")
        self.assertOneLineError(r, 65, store.replace("\n", "\\x0a"), "corrupt record (bad magic)")

    def test_a_url_or_certificate_path_with_a_newline_gives_one_line_errors(self):
        r = self.nx("-u", "redis://127.0.0.1:1\n2/0", "get", "k")
        self.assertOneLineError(r, 64, "redis://127.0.0.1:1\\x0a2/0", "bad port '1\\x0a2'")
        r = self.nx("-u", "unix:///tmp/r.sock?db=1&x\ny=1", "get", "k")
        self.assertOneLineError(r, 64, "unknown parameter 'x\\x0ay'")
        r = self.nx("-u", "rediss://127.0.0.1:1", "--cacert", os.path.join(self.tmp, "no\nsuch"),
                    "get", "k")
        self.assertOneLineError(r, 64, "--cacert '", "no\\x0asuch'", "cannot load")
        r = self.nx("-u", "file://" + os.path.join(self.tmp, "s\nt") + "?sync=2", "get", "k")
        self.assertOneLineError(r, 64, "s\\x0at", "sync must be 0 or 1")


class BusyMessages(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_a_free_lock_with_a_waiter_first_in_line_says_so(self):
        # A waiter first in line (here one whose process is gone: its place
        # lasts until its lease lapses) makes a `-n` busy though no one holds
        # the lock. It must not say "held until 1970-01-01", as the zero expiry
        # it has would print. The waiter's entry is planted on Redis as a
        # queued waiter's own step writes it, with a lease a minute long, so no
        # timing decides the outcome.
        queue = side_key("job", "queue")
        leases = side_key(queue, "lease")
        seconds, micros = (int(x) for x in self.redis.cli("TIME").split())
        now = seconds * 1_000_000 + micros
        self.redis.cli("ZADD", queue, str(now), "qplanted")
        self.redis.cli("ZADD", leases, str(now + 60_000_000), "qplanted")
        r = self.nx("-u", self.redis.url, "run-locked", "-n", "job", "true")
        self.assertOneLineError(r, 75, "free, but another waiter is first in line")
        self.assertNotIn("1970", r.stderr.decode())
        out = json.loads(self.nx("-u", self.redis.url, "--json", "lock", "-n", "job").stdout)
        self.assertEqual(out["exit_status"], 75, out)
        self.assertTrue(out["queued_ahead"], out)
        self.assertNotIn("held_until", out)
    def test_a_holder_that_is_gone_is_shown_as_gone(self):
        # `lock` records the process that asked (here a shell that has exited)
        # as the holder: status and the busy message must not show its pid as if
        # it ran, and must say what is left to do. A live holder is not gone.
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                url = ["-u", backend.url]
                shell = subprocess.run(["sh", "-c", '"$0" "$@" >/dev/null', BIN, *url,
                                        "lock", "-t", "60", "gone"], env=self.env, timeout=30)
                self.assertEqual(shell.returncode, 0)
                r = self.nx(*url, "status", "gone")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("no longer running", r.stdout.decode())
                self.assertIn("nxlock unlock --force gone", r.stdout.decode())
                held = json.loads(self.nx(*url, "--json", "status", "gone").stdout)
                self.assertIs(held["holder"]["running"], False, held)
                r = self.nx(*url, "lock", "-n", "gone")
                self.assertOneLineError(r, 75, "no longer running")

                live = self.popen(*url, "run-locked", "-t", "60", "alive", "sleep", "30")
                self.addCleanup(lambda: live.poll() is None and (live.kill(), live.wait()))
                self.assertTrue(wait_for(lambda: b"holder:" in self.nx(*url, "status", "alive").stdout,
                                         20))
                r = self.nx(*url, "status", "alive")
                self.assertNotIn("no longer running", r.stdout.decode())
                self.assertNotIn("running", json.loads(
                    self.nx(*url, "--json", "status", "alive").stdout)["holder"])
                live.kill()
                live.wait()

    def test_a_lock_held_shared_names_its_holders(self):
        # A shared lock has no holder record of its own: its holders' are named.
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                url = ["-u", backend.url]
                for _ in range(2):
                    self.assertEqual(self.nx(*url, "lock", "--shared", "-t", "60", "sh").returncode, 0)
                for args in (("lock", "-n", "sh"), ("run-locked", "-n", "sh", "true"),
                             ("lock", "-w", "0.2", "sh")):
                    r = self.nx(*url, *args)
                    self.assertOneLineError(r, 75, "busy, held until ",
                                            " by 2 shared holders: pid %d on " % os.getpid())
                out = json.loads(self.nx(*url, "--json", "lock", "-n", "sh").stdout)
                self.assertEqual([h["holder"]["pid"] for h in out["shared"]], [os.getpid()] * 2)

    def test_an_interrupted_wait_names_its_key(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                url = ["-u", backend.url]
                self.assertEqual(self.nx(*url, "lock", "-t", "60", "waited").returncode, 0)
                for command in (("lock",), ("run-locked",)):
                    args = [*url, "--json", *command, "-w", "30", "waited"]
                    if command == ("run-locked",):
                        args.append("true")
                    waiter = self.popen(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    self.addCleanup(lambda: waiter.poll() is None and (waiter.kill(), waiter.wait()))
                    queue = side_key("waited", "queue")
                    self.assertTrue(wait_for(lambda: self.queued(backend, queue) == 1, 20))
                    waiter.terminate()
                    out, _ = waiter.communicate(timeout=30)
                    self.assertEqual(waiter.returncode, 143)
                    got = json.loads(out)
                    self.assertEqual((got["key"], got["interrupted_by"], got["acquired"]),
                                     ("waited", "SIGTERM", False), got)

    def test_seconds_left_is_what_surely_remains_not_two_more_than_the_ttl(self):
        # A lock's value is now + ttl + 1, held through that second: -t 60 leaves
        # between 61 and 62 seconds, of which 61 are sure. Never "62s left".
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                url = ["-u", backend.url]
                for take, look in ((("-t", "60"), ()), (("--slots", "1", "-t", "60"), ("--slots", "1")),
                                   (("--shared", "-t", "60"), ())):
                    key = take[0].strip("-")
                    self.assertEqual(self.nx(*url, "lock", *take, key).returncode, 0)
                    status = json.loads(self.nx(*url, "--json", "status", *look, key).stdout)
                    for seen in status.get("slots", [status]):
                        if seen.get("state") == "held":
                            self.assertEqual(seen["seconds_left"],
                                             seen["expires_at"] - status["now"], status)
                            self.assertTrue(50 <= seen["seconds_left"] <= 61, status)
                    text = self.nx(*url, "status", *look, key).stdout.decode()
                    self.assertRegex(text, r"\((5[0-9]|6[01])s left\)")
                    self.assertNotIn("62s", text)
                    busy = json.loads(self.nx(*url, "--json", "lock", "-n", *look, key).stdout)
                    self.assertEqual(busy["exit_status"], 75, busy)
                    if "seconds_left" in busy:
                        self.assertTrue(50 <= busy["seconds_left"] <= 61, busy)
                listed = json.loads(self.nx(*url, "--json", "list").stdout)
                self.assertTrue(listed["locks"])
                for row in listed["locks"]:
                    self.assertEqual(row["seconds_left"], row["expires_at"] - listed["now"], row)
                    self.assertTrue(50 <= row["seconds_left"] <= 61, row)
                table = self.nx(*url, "list").stdout.decode()
                self.assertNotIn("in 62s", table)
                self.assertRegex(table, r"(?m)^t .* in (5[0-9]|6[01])s ")


class HttpServer:
    """A server that answers every connection as an HTTP server answers a request it
    cannot parse, on a free loopback port and on a unix socket; stopped by close()."""

    ANSWER = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
              b"Connection: close\r\n\r\nBad Request")

    def __init__(self, directory):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.unix_path = os.path.join(directory, "http.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        self.stopped = False
        self.threads = []
        for listener in (self.tcp, self.unix):
            listener.listen(16)
            listener.settimeout(0.2)
            thread = threading.Thread(target=self.serve, args=(listener,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def serve(self, listener):
        while not self.stopped:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(self.ANSWER)
                except OSError:
                    pass

    def close(self):
        self.stopped = True
        for thread in self.threads:
            thread.join()
        self.tcp.close()
        self.unix.close()


class WhatTheServerSays(NxlockTestCase):
    """A Redis that wants a password, and a port where something else listens:
    one line saying so, from the lock commands and from doctor."""

    @classmethod
    def setUpClass(cls):
        cls.locked = RedisServer(password="s3cret")
        cls.addClassCleanup(cls.locked.stop)

    COMMANDS = (("lock", "k"), ("status", "k"), ("get", "k"), ("setnx", "k", "v"), ("list",),
                ("unlock", "--force", "k"), ("run-locked", "k", "true"), ("lock", "--shared", "k"),
                ("lock", "--slots", "2", "k"))

    def test_a_server_that_wants_a_password_none_was_given(self):
        for url in ("redis://127.0.0.1:%d" % self.locked.port, self.locked.unix_url):
            for args in self.COMMANDS:
                with self.subTest(url=url, args=args):
                    r = self.nx("-u", url, *args)
                    self.assertOneLineError(
                        r, 77, "authentication required; give --password-file FILE or "
                        "NXLOCK_PASSWORD")
                    self.assertNotIn(b"INFO", r.stderr)
            r = self.nx("-u", url, "doctor")
            self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
            self.assertRegex(r.stdout.decode(), r"(?m)^FAIL auth the server requires a password, "
                             r"and none was given \u2014 .*--password-file FILE or NXLOCK_PASSWORD$")
        # A wrong one is still told as a failure, not a missing password.
        r = self.nx("-u", "redis://:wrong@127.0.0.1:%d" % self.locked.port, "lock", "k")
        self.assertOneLineError(r, 77, "authentication failed")

    def test_an_http_server_on_the_port_is_not_redis(self):
        http = HttpServer(self.tmp)
        self.addCleanup(http.close)
        said = "not a Redis server (it answered `HTTP/1.1 400 Bad Request`)"
        for url in ("redis://127.0.0.1:%d" % http.port, "unix://" + http.unix_path):
            for args in self.COMMANDS:
                with self.subTest(url=url, args=args):
                    self.assertOneLineError(self.nx("-u", url, *args), 69, said)
            r = self.nx("-u", url, "doctor")
            out = r.stdout.decode()
            self.assertEqual(r.returncode, 69, out + r.stderr.decode())
            self.assertRegex(out, r"(?m)^FAIL protocol %s \u2014 .*host and port$" % re.escape(said))
            self.assertNotIn("database", out)
            self.assertOneLineError(r, 69, said)


if __name__ == "__main__":
    unittest.main()
