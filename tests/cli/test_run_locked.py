"""run-locked: exit statuses, environment, signals, renewal, a lost lock, nxlock's own death."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from harness import BIN, NxlockTestCase


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open("/proc/%d/stat" % pid) as f:  # noqa: the file is closed by `with`
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for(predicate, timeout=10.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class RunLocked(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def assertFree(self, backend, key="job"):
        self.assertEqual(self.nx(*backend.args(), "status", key).returncode, 1,
                         "lock %s is released" % key)

    def test_exit_statuses_and_release(self):
        script = os.path.join(self.tmp, "not-executable")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o644)
        cases = [
            (["true"], 0),
            (["sh", "-c", "exit 3"], 3),
            (["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM),
            (["no-such-command-nxlock"], 127),
            ([script], 126),
        ]
        for backend in self.backends():
            for command, status in cases:
                with self.subTest(backend=backend.name, command=command):
                    r = self.nx(*backend.args(), "run-locked", "job", *command)
                    self.assertEqual(r.returncode, status, r.stderr)
                    self.assertFree(backend)
            with self.subTest(backend=backend.name, case="not found message"):
                r = self.nx(*backend.args(), "run-locked", "job", "no-such-command-nxlock")
                self.assertOneLineError(r, 127, "no-such-command-nxlock", "not found")

    def test_busy_does_not_start_the_command(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                value = self.nx(*u, "lock", "job").stdout.decode().strip()
                marker = os.path.join(self.tmp, "ran-" + backend.name)
                r = self.nx(*u, "run-locked", "-n", "job", "touch", marker)
                self.assertEqual(r.returncode, 75)
                self.assertIn(b"held until", r.stderr)
                self.assertEqual(self.nx(*u, "run-locked", "-E", "9", "-n", "job", "touch",
                                         marker).returncode, 9)
                self.assertFalse(os.path.exists(marker))
                self.assertEqual(self.nx(*u, "get", "job").stdout.decode().strip(), value)

    def test_environment_and_stdio_pass_through(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                r = self.nx(*backend.args(), "--prefix", "p:", "run-locked", "job", "sh", "-c",
                            'echo "$NXLOCK_KEY=$NXLOCK_VALUE"; cat; echo err >&2',
                            input=b"from stdin\n")
                self.assertEqual(r.returncode, 0, r.stderr)
                first, second = r.stdout.decode().splitlines()
                key, value = first.split("=")
                self.assertEqual(key, "p:job")
                self.assertGreater(int(value), time.time())
                self.assertEqual(second, "from stdin")
                self.assertEqual(r.stderr, b"err\n")

    def test_options_end_at_key(self):
        r = self.nx("run-locked", "-n", "job", "sh", "-c", 'printf "[%s]" "$@"', "sh", "-n", "--json",
                    "-x")
        self.assertEqual(r.stdout, b"[-n][--json][-x]")
        r = self.nx("run-locked", "--", "job", "--", "echo", "--", "a")
        self.assertEqual(r.stdout, b"-- a\n")

    def test_signals_are_forwarded(self):
        for backend in self.backends()[:2]:
            for signo in (signal.SIGUSR1, signal.SIGHUP, signal.SIGINT):
                with self.subTest(backend=backend.name, signal=signo):
                    got = os.path.join(self.tmp, "got")
                    ready = os.path.join(self.tmp, "ready")
                    for path in (got, ready):
                        if os.path.exists(path):
                            os.unlink(path)
                    script = ('trap "echo %d > %s; exit 7" %d; touch %s; '
                              'while :; do sleep 0.05; done' % (signo, got, signo, ready))
                    p = self.popen(*backend.args(), "run-locked", "job", "sh", "-c", script)
                    self.assertTrue(wait_for(lambda: os.path.exists(ready)))
                    p.send_signal(signo)
                    self.assertEqual(p.wait(timeout=10), 7)
                    self.assertEqual(read(got).strip(), str(int(signo)))
                    self.assertFree(backend)

    def test_renewal_keeps_the_lock_past_twice_the_ttl(self):
        for backend in self.backends()[:2]:
            with self.subTest(backend=backend.name):
                u = backend.args()
                p = self.popen(*u, "run-locked", "-t", "1", "job", "sleep", "4.5")
                self.assertTrue(wait_for(lambda: self.nx(*u, "status", "job").returncode == 0))
                refusals = 0
                start = time.monotonic()
                while p.poll() is None and time.monotonic() - start < 4:
                    r = self.nx(*u, "lock", "-n", "job")
                    self.assertEqual(r.returncode, 75, "lock taken while the job runs")
                    refusals += 1
                    time.sleep(0.4)
                self.assertEqual(p.wait(timeout=20), 0)
                self.assertGreaterEqual(refusals, 6)
                self.assertFree(backend)

    def test_lost_lock_stops_the_whole_pipeline(self):
        for backend in self.backends()[:2]:
            with self.subTest(backend=backend.name):
                u = backend.args()
                marker = "10%d.2%d" % (os.getpid() % 100, len(backend.name))  # unique sleep arg
                self.addCleanup(subprocess.run, ["pkill", "-f", "^sleep %s$" % marker])
                p = self.popen(*u, "run-locked", "-t", "3", "--kill-after", "1", "job",
                               "sh", "-c", "sleep %s | sleep %s" % (marker, marker),
                               stderr=subprocess.PIPE)
                self.assertTrue(wait_for(lambda: len(self.pids_of(marker)) == 2))
                # Another client breaks in: the lock now holds someone else's value.
                self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)
                self.assertEqual(self.nx(*u, "lock", "-t", "60", "job").returncode, 0)
                status = p.wait(timeout=15)
                err = p.stderr.read().decode()
                p.stderr.close()
                self.assertEqual(status, 79, err)
                self.assertIn("lost", err)
                self.assertTrue(wait_for(lambda: not self.pids_of(marker), timeout=5),
                                "pipeline members survived: %s" % self.pids_of(marker))
                # The new holder's lock was left alone.
                self.assertEqual(self.nx(*u, "status", "job").returncode, 0)

    def pids_of(self, marker):
        # Anchored: the sh -c and nxlock command lines mention the marker too.
        out = subprocess.run(["pgrep", "-f", "^sleep %s$" % marker], capture_output=True).stdout
        return [int(x) for x in out.split() if alive(int(x))]

    def test_sigkill_of_nxlock_leaves_no_child(self):
        # Not just the direct child: a grandchild (a pipeline member, a `&` job) too.
        for backend in self.backends()[:2]:
            with self.subTest(backend=backend.name):
                pidfile = os.path.join(self.tmp, "child-" + backend.name)
                p = self.popen(*backend.args(), "run-locked", "job", "sh", "-c",
                               'sleep 100 & echo "$$ $!" > %s.tmp; mv %s.tmp %s; wait'
                               % (pidfile, pidfile, pidfile), stdout=subprocess.DEVNULL)
                self.assertTrue(wait_for(lambda: read(pidfile).strip() != ""))
                child, grandchild = map(int, read(pidfile).split())
                self.addCleanup(lambda: alive(grandchild) and os.kill(grandchild, 9))
                self.assertTrue(alive(child) and alive(grandchild))
                p.kill()
                p.wait(timeout=5)
                for pid in (child, grandchild):
                    self.assertTrue(wait_for(lambda: not alive(pid), timeout=5),
                                    "process %d outlived nxlock" % pid)

    def test_leaves_no_process_behind(self):
        # A child subreaper inherits whatever nxlock leaves orphaned (a helper,
        # a zombie): it must find nothing, as a container's PID 1 that never
        # reaps would otherwise collect zombies from every cron run.
        checker = textwrap.dedent("""
            import ctypes, os, subprocess, sys
            ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
            for _ in range(20):
                subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
            try:
                print("left behind:", os.waitpid(-1, os.WNOHANG))
            except ChildProcessError:
                print("nothing left")
            """)
        for backend in self.backends()[:2]:
            with self.subTest(backend=backend.name):
                r = subprocess.run([sys.executable, "-c", checker, BIN, *backend.args(),
                                    "run-locked", "job", "true"],
                                   env=self.env, capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.strip(), b"nothing left")

    def test_signal_while_waiting_ends_cleanly(self):
        for backend in self.backends()[:2]:
            with self.subTest(backend=backend.name):
                u = backend.args()
                value = self.nx(*u, "lock", "job").stdout.decode().strip()
                marker = os.path.join(self.tmp, "started-" + backend.name)
                p = self.popen(*u, "run-locked", "job", "touch", marker, stderr=subprocess.PIPE)
                time.sleep(0.5)
                self.assertIsNone(p.poll(), "run-locked waits for the lock")
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(timeout=5), 128 + signal.SIGTERM)
                p.stderr.close()
                self.assertFalse(os.path.exists(marker))
                self.assertEqual(self.nx(*u, "get", "job").stdout.decode().strip(), value)

    def test_on_lost_ignore_keeps_the_child(self):
        backend = self.backends()[0]
        u = backend.args()
        p = self.popen(*u, "run-locked", "-t", "3", "--on-lost", "ignore", "job", "sh", "-c",
                       "sleep 2.5; exit 5", stderr=subprocess.PIPE)
        time.sleep(0.5)
        self.nx(*u, "unlock", "--force", "job")
        self.nx(*u, "lock", "-t", "60", "job")
        self.assertEqual(p.wait(timeout=15), 5)
        self.assertIn(b"lost", p.stderr.read())
        p.stderr.close()


if __name__ == "__main__":
    unittest.main()
