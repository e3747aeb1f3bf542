"""run-locked --hold: once per cron tick across hosts, on every backend (harness.backends)."""
import json
import os
import time
import unittest

from harness import NxlockTestCase, smoke, wait_for


def wait_until(unix_time, timeout=30.0):
    """Sleeps until the wall clock reaches `unix_time` (bounded)."""
    assert wait_for(lambda: time.time() >= unix_time, timeout, interval=0.01), \
        "clock did not reach %f" % unix_time


class Hold(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def backends(self, offering="lock"):
        # A hold is seconds long, so the unix-socket flavour of Redis over TCP is
        # left to the other tests (and to NXLOCK_TEST_BACKENDS=all).
        return super().backends(offering=offering, by_default=("file", "redis"))

    def marker(self, backend, name):
        return os.path.join(self.tmp, "%s-%s" % (backend.name, name))

    def wait_free(self, backend, key, until):
        """Waits (to the Unix time `until` at most) for `status KEY` to say free."""
        wait_for(lambda: self.nx(*backend.args(), "status", key).returncode != 0,
                 max(0.0, until - time.time()), interval=0.05)

    def run_json(self, backend, *args):
        r = self.nx(*backend.args(), "--json", "run-locked", *args)
        return r, json.loads(r.stdout.decode().splitlines()[-1])

    def test_a_second_run_within_the_hold_does_not_run_and_the_next_tick_does(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                started = time.time()
                # -t 1: the hold outlasts the ttl, and wins.
                r, out = self.run_json(backend, "-n", "-t", "1", "--hold", "4", "job",
                                       "touch", self.marker(backend, "1"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(os.path.exists(self.marker(backend, "1")))
                hold_until = out["hold_until"]
                # Held at least 4 s from before we started it, and not a second more.
                self.assertGreaterEqual(hold_until + 1, started + 4)
                self.assertLessEqual(hold_until + 1, time.time() + 4 + 1)

                time.sleep(1)  # a bound: a second into the hold
                r = self.nx(*u, "run-locked", "-n", "-t", "1", "--hold", "4", "job",
                            "touch", self.marker(backend, "2"))
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertFalse(os.path.exists(self.marker(backend, "2")))
                # Not "no longer running, which finished and holds it for --hold".
                self.assertOneLineError(r, 75, "), whose job has finished: --hold keeps the "
                                        "lock until then")
                self.assertNotIn(b"no longer running", r.stderr)

                # Past the ttl's own expiry (-t 1 taken in second A expires at
                # A + 3): still held, by the hold.
                r = self.nx(*u, "--json", "status", "job")
                acquired_at = json.loads(r.stdout)["holder"]["acquired_at"]
                wait_until(acquired_at + 3.1)
                r = self.nx(*u, "status", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                text = r.stdout.decode()
                self.assertIn("finished", text)
                self.assertIn("holding the lock until", text)
                r = self.nx(*u, "--json", "status", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                status = json.loads(r.stdout)
                self.assertEqual((status["state"], status["held"]), ("held", True))
                self.assertEqual(status["hold_until"], hold_until)
                self.assertEqual(status["expires_at"], hold_until)
                self.assertEqual(status["holder"]["command"],
                                 "touch " + self.marker(backend, "1"))
                self.assertLessEqual(abs(status["holder"]["finished_at"] - started), 2)

                # The next tick, after the hold: it runs.
                wait_until(hold_until + 1 + 0.05)
                if backend.name == "etcd":
                    # A lease lapses up to two seconds after the second it was granted
                    # for (man page, ETCD): the hold ends then.
                    self.wait_free(backend, "job", until=hold_until + 3)
                r = self.nx(*u, "run-locked", "-n", "--hold", "4", "job",
                            "touch", self.marker(backend, "3"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(os.path.exists(self.marker(backend, "3")))

    def test_a_waiter_enters_when_the_hold_ends_not_before(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                entered = self.marker(backend, "entered")
                # The job runs 1 s; the waiter waits through the job, then through
                # the hold's compare-and-set (which must not let it in), to the end.
                first = self.popen(*u, "--json", "run-locked", "--hold", "3", "job",
                                   "sleep", "1", stdout=-1)
                self.addCleanup(first.wait)
                self.assertTrue(wait_for(lambda: self.nx(*u, "status", "job").returncode == 0),
                                "the first run never took the lock")
                waiter = self.popen(*u, "run-locked", "-w", "20", "job", "python3", "-c",
                                    "import time; open(%r, 'w').write(repr(time.time()))" % entered)
                self.addCleanup(waiter.wait)
                out, _ = first.communicate(timeout=20)
                self.assertEqual(first.returncode, 0)
                hold_until = json.loads(out.decode())["hold_until"]
                self.assertEqual(waiter.wait(timeout=20), 0)
                with open(entered) as f:
                    entered_at = float(f.read())
                # The lock expires at hold_until + 1 (value < now); 50 ms for the
                # difference between a reading of Redis TIME carried on our clock.
                self.assertGreaterEqual(entered_at, hold_until + 1 - 0.05)
                self.assertLessEqual(entered_at, hold_until + 1 + 3)

    def test_without_hold_the_release_is_immediate(self):
        for backend in self.backends():
            for hold in ([], ["--hold", "0"]):
                with self.subTest(backend=backend.name, hold=hold):
                    u = backend.args()
                    r, out = self.run_json(backend, "-n", *hold, "job", "true")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertNotIn("hold_until", out)
                    marker = self.marker(backend, "after-%d" % len(hold))
                    r = self.nx(*u, "run-locked", "-n", "job", "touch", marker)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertTrue(os.path.exists(marker))

    @smoke
    def test_a_job_longer_than_the_hold_releases_at_its_end(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                r, out = self.run_json(backend, "-n", "--hold", "0.5", "job", "sleep", "1.5")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn("hold_until", out)
                self.assertEqual(self.nx(*backend.args(), "status", "job").returncode, 1)

    def test_a_command_that_never_started_holds_nothing(self):
        script = os.path.join(self.tmp, "not-executable")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o644)
        for backend in self.backends():
            for command, status in ((["no-such-command-nxlock"], 127), ([script], 126)):
                with self.subTest(backend=backend.name, status=status):
                    r = self.nx(*backend.args(), "run-locked", "-n", "--hold", "60", "job",
                                *command)
                    self.assertEqual(r.returncode, status, r.stderr)
                    self.assertEqual(self.nx(*backend.args(), "status", "job").returncode, 1)

    def test_a_lock_that_expired_under_the_job_is_not_held(self):
        # Where an expired lock keeps its timestamp, and status says "expired" (on
        # etcd the lease takes the key with it: "free").
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                # No renewal, ttl 1: the lock expires (by int(start) + 3) while the job runs,
                # which is a lost lock; `ignore` lets the job finish all the same.
                r = self.nx(*u, "run-locked", "--no-renew", "--on-lost", "ignore", "-t", "1",
                            "--hold", "60", "job", "sleep", "3.2")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(b"lost", r.stderr)
                r = self.nx(*u, "--json", "status", "job")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(json.loads(r.stdout)["state"], "expired")

    def test_bad_hold_values_are_usage_errors(self):
        marker = os.path.join(self.tmp, "ran")
        for value in ("-1", "nan", "inf", "-inf", "abc", "", "1e400", "0x10", "5s", "2e12"):
            with self.subTest(value=value):
                r = self.nx("run-locked", "--hold", value, "job", "touch", marker)
                self.assertOneLineError(r, 64, "--hold")
                self.assertFalse(os.path.exists(marker))
        r = self.nx("run-locked", "--hold=0.25", "job", "touch", marker)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
