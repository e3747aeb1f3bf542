"""--jitter SECONDS (lock, run-locked): a uniformly random delay of 0..SECONDS
before the first try, so that a fleet's same tick spreads out; -w counts from
the first try, a signal during the delay takes nothing, and --json and the
metrics record it (man page, "A fleet of hosts"); on every backend with locks."""
import json
import os
import signal
import time
import unittest

from harness import NxlockTestCase, smoke, wait_for

KEY = "job"


def blocks_sigterm(pid):
    """True once process `pid` has blocked SIGTERM: nxlock's signal channel is
    open, so a SIGTERM from now on is its to handle (the jitter, or the wait)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


class Jitter(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def metric(self, metrics, name):
        path = os.path.join(metrics, "nxlock_%s.prom" % KEY)
        with open(path) as f:
            for line in f:
                if line.startswith(name + "{"):
                    return float(line.split()[-1])
        return None

    @smoke
    def test_the_delay_is_drawn_within_bounds_and_recorded(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                began = time.monotonic()
                r = self.nx(*u, "--json", "lock", "-n", "--jitter", "0.4", KEY)
                took = time.monotonic() - began
                self.assertEqual(r.returncode, 0, r.stderr)
                out = json.loads(r.stdout)
                self.assertTrue(out["acquired"])
                self.assertGreaterEqual(out["jitter_seconds"], 0)
                self.assertLessEqual(out["jitter_seconds"], 0.4)
                self.assertGreaterEqual(took, out["jitter_seconds"])
                r = self.nx(*u, "unlock", KEY, out["value"])
                self.assertEqual(r.returncode, 0, r.stderr)

                metrics = os.path.join(self.tmp, "metrics-" + backend.name)
                os.makedirs(metrics, exist_ok=True)
                r = self.nx(*u, "--json", "run-locked", "-n", "--jitter", "0.3",
                            "--metrics-dir", metrics, KEY, "true")
                self.assertEqual(r.returncode, 0, r.stderr)
                out = json.loads(r.stdout)
                self.assertLessEqual(out["jitter_seconds"], 0.3)
                self.assertAlmostEqual(self.metric(metrics, "nxlock_last_jitter_seconds"),
                                       out["jitter_seconds"], delta=0.002)

                # A busy run slept its delay too, and says so (the metrics keep
                # the last run's figures, as for every busy refusal).
                held = self.nx(*u, "lock", "-t", "30", KEY)
                self.assertEqual(held.returncode, 0, held.stderr)
                r = self.nx(*u, "--json", "run-locked", "-n", "--jitter", "0.3", KEY, "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                out = json.loads(r.stdout)
                self.assertFalse(out["acquired"])
                self.assertLessEqual(out["jitter_seconds"], 0.3)
                r = self.nx(*u, "unlock", KEY, held.stdout.decode().strip())
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_delays_differ(self):
        # Uniform over 0..1000 microseconds: ten draws alike would be a constant.
        draws = set()
        for _ in range(10):
            r = self.nx("--json", "run-locked", "-n", "--jitter", "0.001", KEY, "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            draws.add(json.loads(r.stdout)["jitter_seconds"])
        self.assertGreater(len(draws), 1, draws)

    def test_wait_counts_from_the_first_try(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                held = self.nx(*u, "lock", "-t", "30", KEY)
                self.assertEqual(held.returncode, 0, held.stderr)
                self.addCleanup(self.nx, *u, "unlock", KEY, held.stdout.decode().strip())
                began = time.monotonic()
                r = self.nx(*u, "--json", "lock", "--jitter", "1.5", "-w", "0.5", KEY)
                took = time.monotonic() - began
                self.assertEqual(r.returncode, 75, r.stderr)
                out = json.loads(r.stdout)
                # The whole -w after the whole delay: neither eats the other.
                self.assertGreaterEqual(took, out["jitter_seconds"] + 0.5)

    @smoke
    def test_a_signal_during_the_delay_takes_nothing(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                marker = os.path.join(self.tmp, "ran-" + backend.name)
                # A delay of 0..1000 s: the signal comes within it but once in a thousand.
                p = self.popen(*u, "run-locked", "--jitter", "1000", KEY, "touch", marker)
                self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
                self.assertTrue(wait_for(lambda: blocks_sigterm(p.pid), 20))
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(20), 128 + signal.SIGTERM)
                self.assertFalse(os.path.exists(marker))
                r = self.nx(*u, "status", KEY)
                self.assertNotEqual(r.returncode, 0, r.stdout)  # free: nothing was taken

                p = self.popen(*u, "lock", "--jitter", "1000", KEY, stderr=-1)
                self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
                self.assertTrue(wait_for(lambda: blocks_sigterm(p.pid), 20))
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=20)
                self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
                self.assertIn(b"during --jitter; nothing was taken", err)
                r = self.nx(*u, "status", KEY)
                self.assertNotEqual(r.returncode, 0, r.stdout)

    def test_a_jitter_not_shorter_than_the_hold_is_warned_of(self):
        r = self.nx("run-locked", "-n", "--jitter", "0.2", "--hold", "0.2", "a", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"--jitter 0.2s is not shorter than --hold 0.2s", r.stderr)
        r = self.nx("run-locked", "-n", "--jitter", "0.1", "--hold", "0.2", "b", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"--jitter", r.stderr)


if __name__ == "__main__":
    unittest.main()
