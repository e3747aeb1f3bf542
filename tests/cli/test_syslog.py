"""--syslog (NXLOCK_SYSLOG=1): one line of key=value words per event in the system log,
ident nxlock, at the priority the man page gives, and never a wait on the log.

Real datagrams to a real /dev/log: each nxlock runs in a mount namespace made for it
(unshare, as root), where /dev is a directory of the test's own that holds the test's
datagram socket as `log` (and /dev/null, /dev/urandom... bound from the real /dev)."""
import os
import re
import shutil
import socket
import subprocess
import time
import unittest

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase

# Inside the new mount namespace: the real device files onto the test's own /dev,
# which then covers /dev; then nxlock.
IN_NAMESPACE = """
dev=$1; shift
for name in null zero random urandom; do mount --bind "/dev/$name" "$dev/$name" || exit 125; done
mount --rbind "$dev" /dev || exit 125
exec "$@"
"""

# "<PRI>Mmm dd hh:mm:ss nxlock[PID]: MESSAGE", as glibc's syslog(3) writes it.
DATAGRAM = re.compile(rb"<(\d+)>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d nxlock\[(\d+)\]: (.*)")
USER = 8  # the facility
WARNING, NOTICE, INFO = 4, 5, 6


def namespaces_work():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, timeout=COMMAND_TIMEOUT)
    return probe.returncode == 0


def words(message):
    """A line's key=value words as a dict; a quoted value keeps its quotes."""
    found = {}
    for word in re.findall(rb'[a-z_]+=(?:"[^"]*"|\S+)', message):
        name, value = word.split(b"=", 1)
        found[name.decode()] = value.decode()
    return found


@unittest.skipUnless(namespaces_work(), "needs root and unshare(1) to make a mount namespace")
class Syslog(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def setUp(self):
        super().setUp()
        self.dev = os.path.join(self.tmp, "dev")
        os.makedirs(self.dev)
        for name in ("null", "zero", "random", "urandom"):
            open(os.path.join(self.dev, name), "w").close()
        self.log = None

    def listen(self):
        """The test's /dev/log, a datagram socket nobody else writes to."""
        self.log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(self.log.close)
        self.log.bind(os.path.join(self.dev, "log"))
        self.log.setblocking(False)
        return self.log

    def nx_logged(self, *args, env=None, timeout=COMMAND_TIMEOUT):
        """nxlock with the test's /dev as /dev; CompletedProcess (bytes)."""
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_NAMESPACE,
                   "sh", self.dev, BIN, *args]
        result = subprocess.run(command, capture_output=True, env=env or self.env,
                                timeout=timeout)
        self.assertNotEqual(result.returncode, 125, result.stderr)  # the namespace failed
        return result

    def lines(self):
        """[(priority, pid, words)] of every datagram received so far."""
        got = []
        while True:
            try:
                datagram = self.log.recv(65536)
            except BlockingIOError:
                return got
            match = DATAGRAM.fullmatch(datagram)
            self.assertTrue(match, datagram)
            got.append((int(match.group(1)), int(match.group(2)), words(match.group(3)),
                        match.group(3)))

    def events(self):
        """[(event, priority, words)], the facility checked to be user's."""
        found = []
        for priority, _, fields, _ in self.lines():
            self.assertEqual(priority & ~7, USER, fields)
            found.append((fields["event"], priority & 7, fields))
        return found

    def test_run_locked_taken_and_ended_on_each_backend(self):
        self.listen()
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                ok = self.nx_logged(*backend.args(), "run-locked", "--syslog", "job", "true")
                self.assertEqual(ok.returncode, 0, ok.stderr)
                failed = self.nx_logged(*backend.args(), "run-locked", "--syslog", "job",
                                        "sh", "-c", "exit 3", "secret-argument")
                self.assertEqual(failed.returncode, 3, failed.stderr)
                lines = self.lines()
                self.assertTrue(all(b"secret" not in raw for *_, raw in lines), lines)
                events = [(w["event"], p & 7, w) for p, _, w, _ in lines]
                self.assertEqual([(e, p) for e, p, _ in events],
                                 [("taken", INFO), ("ended", INFO),
                                  ("taken", INFO), ("ended", WARNING)])
                taken, ended = events[0][2], events[1][2]
                self.assertEqual(taken["key"], "job")
                self.assertGreater(int(taken["token"]), 0)
                self.assertGreaterEqual(float(taken["waited"]), 0)
                self.assertEqual(taken["command"], "true")
                self.assertEqual(ended["status"], "0")
                self.assertGreaterEqual(float(ended["duration"]), 0)
                self.assertEqual(events[2][2]["command"], "sh")  # argv[0] alone
                self.assertEqual(events[3][2]["status"], "3")
                self.assertGreater(int(events[2][2]["token"]), int(taken["token"]))

    def test_busy_names_the_holder(self):
        self.listen()
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                held = self.nx(*backend.args(), "lock", "job")
                self.assertEqual(held.returncode, 0, held.stderr)
                busy = self.nx_logged(*backend.args(), "run-locked", "--syslog", "-n", "job",
                                      "true")
                self.assertEqual(busy.returncode, 75, busy.stderr)
                events = self.events()
                self.assertEqual([(e, p) for e, p, _ in events], [("busy", NOTICE)])
                self.assertEqual(events[0][2]["key"], "job")
                # `lock` names the process that asked for it: this test.
                self.assertEqual(events[0][2]["holder_pid"], str(os.getpid()))
                self.assertEqual(events[0][2]["holder_host"], socket.gethostname())
                self.nx(*backend.args(), "unlock", "--force", "job")

    def test_lost_and_stopped_are_warnings(self):
        self.listen()
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                lost = self.nx_logged(*backend.args(), "run-locked", "--syslog", "-t", "1",
                                      "--no-renew", "--kill-after", "0.2", "job", "sleep", "10")
                self.assertEqual(lost.returncode, 79, lost.stderr)
                stopped = self.nx_logged(*backend.args(), "run-locked", "--syslog",
                                         "--max-runtime", "0.2", "job", "sleep", "10")
                self.assertEqual(stopped.returncode, 124, stopped.stderr)
                events = self.events()
                self.assertEqual([(e, p) for e, p, _ in events],
                                 [("taken", INFO), ("lost", WARNING), ("ended", WARNING),
                                  ("taken", INFO), ("stopped", WARNING), ("ended", WARNING)])
                self.assertTrue(events[1][2]["reason"], events[1])
                self.assertEqual(events[2][2]["status"], "79")
                self.assertEqual(events[4][2]["max_runtime"], "0.2")
                self.assertEqual(events[4][2]["command"], "sleep")
                self.assertEqual(events[5][2]["status"], "124")

    def test_lock_and_unlock(self):
        self.listen()
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                taken = self.nx_logged(*url, "lock", "--syslog", "job")
                self.assertEqual(taken.returncode, 0, taken.stderr)
                value = taken.stdout.decode().strip()
                self.assertEqual(self.nx_logged(*url, "lock", "--syslog", "-n", "job").returncode,
                                 75)
                self.assertEqual(self.nx_logged(*url, "unlock", "--syslog", "job",
                                                value).returncode, 0)
                self.assertEqual(self.nx_logged(*url, "unlock", "--syslog", "job",
                                                value).returncode, 1)
                self.nx(*url, "lock", "job")
                self.assertEqual(self.nx_logged(*url, "unlock", "--syslog", "--force",
                                                "job").returncode, 0)
                events = self.events()
                self.assertEqual([(e, p) for e, p, _ in events],
                                 [("taken", INFO), ("busy", NOTICE), ("released", INFO),
                                  ("not_released", WARNING), ("released", INFO)])
                self.assertNotIn("command", events[0][2])  # the lock outlives its taker
                self.assertTrue(events[3][2]["reason"])
                self.assertEqual(events[4][2]["forced"], "yes")

    def test_the_environment_turns_it_on_and_nothing_is_logged_without(self):
        self.listen()
        self.assertEqual(self.nx_logged("run-locked", "job", "true").returncode, 0)
        self.assertEqual(self.lines(), [])
        env = dict(self.env, NXLOCK_SYSLOG="1")
        self.assertEqual(self.nx_logged("run-locked", "job", "true", env=env).returncode, 0)
        self.assertEqual([e for e, _, _ in self.events()], ["taken", "ended"])

    def test_keys_are_escaped_as_list_escapes_them(self):
        self.listen()
        key = 'a b"c\nd\\e'
        result = self.nx_logged("run-locked", "--syslog", key, "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        events = self.events()
        self.assertEqual(events[0][2]["key"], '"a b\\x22c\\x0ad\\x5ce"')
        self.assertNotIn("\n", events[0][2]["key"])

    def test_a_failed_ping_is_a_warning_that_shows_no_path(self):
        self.listen()
        with socket.socket() as s:  # a port nobody listens on: the checker refuses
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = "http://127.0.0.1:%d/secret-check-path" % port
        r = self.nx_logged("run-locked", "--syslog", "--ping", url, "job", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = self.lines()
        self.assertTrue(all(b"secret-check-path" not in raw for *_, raw in lines), lines)
        failed = [(p & 7, w) for p, _, w, _ in lines if w["event"] == "ping_failed"]
        # The start ping's and the end ping's, each a warning naming the lock.
        self.assertEqual(len(failed), 2, lines)
        for priority, fields in failed:
            self.assertEqual(priority, WARNING)
            self.assertEqual(fields["key"], "job")
            self.assertIn("refused", fields["detail"])

    def test_a_full_log_costs_lines_not_time(self):
        log = self.listen()
        # Fill the socket's queue: nobody reads it from here on.
        writer = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(writer.close)
        writer.connect(os.path.join(self.dev, "log"))
        writer.setblocking(False)
        with self.assertRaises(BlockingIOError):
            for _ in range(100000):
                writer.send(b"x" * 1024)
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                started = time.monotonic()
                result = self.nx_logged(*backend.args(), "run-locked", "--syslog", "-n", "job",
                                        "true", timeout=20)
                elapsed = time.monotonic() - started
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stderr, b"")  # a dropped line is not a warning
                self.assertLess(elapsed, 3.0)
                taken = self.nx(*backend.args(), "lock", "-n", "job")
                self.assertEqual(taken.returncode, 0, taken.stderr)  # released
                self.nx(*backend.args(), "unlock", "--force", "job")
        del log

    def test_no_log_socket_costs_nothing(self):
        result = self.nx_logged("run-locked", "--syslog", "-n", "job", "true", timeout=20)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, b"")
        # -v says where the events went.
        traced = self.nx_logged("-v", "run-locked", "--syslog", "-n", "job", "true")
        self.assertEqual(traced.returncode, 0, traced.stderr)
        self.assertIn(b"--syslog: event taken not logged: /dev/log is missing", traced.stderr)


if __name__ == "__main__":
    unittest.main()
