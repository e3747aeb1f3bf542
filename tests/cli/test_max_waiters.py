"""--max-waiters N (lock, run-locked): a taker that would wait leaves at once
(75) when N or more live waiters are ahead of it in line, counted in the step
that queues it, of every kind (exclusive, --shared, --slots); a dead waiter does
not count; -n has nothing to count; a quorum refuses it (64) (man page, lock,
"WAITING IN LINE"); on every backend with locks."""
import json
import os
import signal
import subprocess
import unittest

from harness import NxlockTestCase, smoke, wait_for

KEY = "job"
BURST = 40


class MaxWaiters(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def counting(self):
        """The backends with locks whose takers queue: all but a quorum (refuses it)."""
        return [b for b in self.backends(offering="lock") if b.name != "quorum"]

    def hold(self, backend):
        r = self.nx(*backend.args(), "lock", "-t", "120", KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        self.addCleanup(self.nx, *backend.args(), "unlock", KEY, value)
        return value

    def waiters(self, backend):
        """The live waiters `list` counts for KEY."""
        r = self.nx(*backend.args(), "--json", "list", KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [row for row in json.loads(r.stdout)["locks"] if row["key"] == KEY]
        return rows[0].get("waiters", 0) if rows else 0

    def waiter(self, backend, *options, ttl="60"):
        p = self.popen(*backend.args(), "lock", "-t", ttl, *options, KEY,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        return p

    @smoke
    def test_a_burst_against_a_holder_leaves_exactly_one_waiter(self):
        for backend in self.counting():
            with self.subTest(backend=backend.name):
                value = self.hold(backend)
                grants = os.path.join(self.tmp, "grants-" + backend.name)
                burst = []
                for i in range(BURST):
                    p = self.popen(*backend.args(), "run-locked", "-t", "60", "-w", "120",
                                   "--max-waiters", "1", KEY, "sh", "-c", 'echo "$0" >> "$1"',
                                   "w%d" % i, grants, stderr=subprocess.PIPE)
                    self.addCleanup(lambda p=p: p.poll() is None and (p.kill(), p.wait()))
                    burst.append(p)
                # Every one but the first in line leaves at once.
                self.assertTrue(wait_for(
                    lambda: sum(p.poll() is not None for p in burst) >= BURST - 1, 60))
                waiting = [p for p in burst if p.poll() is None]
                self.assertEqual(len(waiting), 1)
                for p in burst:
                    if p.poll() is not None:
                        err = p.stderr.read()
                        self.assertEqual(p.returncode, 75, err)
                        self.assertRegex(err, rb"not waiting: \d+ runs? already waits? "
                                              rb"\(--max-waiters 1\)")
                self.assertEqual(self.waiters(backend), 1)
                r = self.nx(*backend.args(), "unlock", KEY, value)
                self.assertEqual(r.returncode, 0, r.stderr)
                waiting[0].communicate(timeout=60)
                self.assertEqual(waiting[0].returncode, 0)
                with open(grants) as f:
                    self.assertEqual(len(f.read().split()), 1)
                self.assertEqual(self.waiters(backend), 0)

    def test_n_live_waiters_ahead_refuse_and_fewer_do_not(self):
        for backend in self.counting():
            with self.subTest(backend=backend.name):
                self.hold(backend)
                first = self.waiter(backend, "-w", "60")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 1, 20))
                second = self.waiter(backend, "-w", "60", "--max-waiters", "2")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 2, 20))
                r = self.nx(*backend.args(), "--json", "lock", "--max-waiters", "2", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                out = json.loads(r.stdout)
                self.assertEqual((out["acquired"], out["waiters_ahead"]), (False, 2))
                self.assertIn(b"not waiting: 2 runs already wait (--max-waiters 2)", r.stderr)
                # -E applies, as to any busy lock.
                r = self.nx(*backend.args(), "lock", "-E", "9", "--max-waiters", "1", KEY)
                self.assertEqual(r.returncode, 9, r.stderr)
                self.assertEqual(self.waiters(backend), 2)  # the refused left the line
                for p in (first, second):
                    self.assertIsNone(p.poll())
                    p.kill()
                    p.wait()

    def test_a_dead_waiter_never_counts(self):
        for backend in self.counting():
            with self.subTest(backend=backend.name):
                self.hold(backend)
                # A live first waiter, then one killed behind it: the dead one's entry
                # stays until its lease lapses (on etcd, its key's lease: -t 5).
                live = self.waiter(backend, "-w", "60")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 1, 20))
                dead = self.waiter(backend, "-w", "60", ttl="5")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 2, 20))
                dead.send_signal(signal.SIGKILL)
                dead.wait()
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 1, 30))
                # One live waiter ahead, below 2: it waits (and gives up at -w).
                r = self.nx(*backend.args(), "lock", "-w", "1", "--max-waiters", "2", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"(gave up waiting)", r.stderr)
                self.assertNotIn(b"already wait", r.stderr)
                live.kill()
                live.wait()

    def test_n_has_nothing_to_count(self):
        for backend in self.counting():
            with self.subTest(backend=backend.name):
                self.hold(backend)
                w = self.waiter(backend, "-w", "60")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 1, 20))
                r = self.nx(*backend.args(), "lock", "-n", "--max-waiters", "1", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"busy, held until", r.stderr)
                w.kill()
                w.wait()

    def test_waiters_of_every_kind_count_and_leased_takers_count_them(self):
        for backend in self.backends(offering=("queue", "shared", "slots")):
            with self.subTest(backend=backend.name):
                self.hold(backend)
                first = self.waiter(backend, "-w", "60")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 1, 20))
                for kind in (("--shared",), ("--slots", "2")):
                    r = self.nx(*backend.args(), "lock", *kind, "-w", "60", "--max-waiters",
                                "1", KEY)
                    self.assertEqual(r.returncode, 75, r.stderr)
                    self.assertIn(b"not waiting: 1 run already waits (--max-waiters 1)",
                                  r.stderr)
                shared = self.waiter(backend, "--shared", "-w", "60")
                self.assertTrue(wait_for(lambda: self.waiters(backend) == 2, 20))
                r = self.nx(*backend.args(), "lock", "--max-waiters", "2", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"not waiting: 2 runs already wait", r.stderr)
                for p in (first, shared):
                    self.assertIsNone(p.poll())
                    p.kill()
                    p.wait()

    @smoke
    def test_a_quorum_refuses_it(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                r = self.nx(*backend.args(), "run-locked", "--max-waiters", "1", KEY, "true")
                if backend.name != "quorum":
                    self.assertEqual(r.returncode, 0, r.stderr)
                    continue
                self.assertOneLineError(r, 64, "--max-waiters: not available with a quorum")

    def test_zero_is_refused(self):
        r = self.nx("lock", "--max-waiters", "0", KEY)
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn(b"--max-waiters", r.stderr)


if __name__ == "__main__":
    unittest.main()
