"""run-locked --max-runtime: the job is stopped (SIGTERM, --kill-after, SIGKILL, all of
it), the lock is released, and nxlock exits 124, as timeout(1) does."""
import os
import signal
import time
import unittest

from harness import NxlockTestCase, alive, read, wait_for

# The job writes its pid, and those of a child in its group and of one that
# left it (setsid), to files, then waits: all three must be gone by the end.
GROUP_JOB = """
{trap}
sleep 60 & echo $! > "$1/child"
setsid sleep 60 & echo $! > "$1/escaped"
echo $$ > "$1/job"
wait
"""


class MaxRuntime(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def run_job(self, backend, key, trap, *options):
        """Runs GROUP_JOB under --max-runtime 1; (result, elapsed seconds, the job's pids)."""
        pids = os.path.join(self.tmp, backend.name + "-pids")
        os.makedirs(pids)
        started = time.monotonic()
        result = self.nx(*backend.args(), "run-locked", "--max-runtime", "1", *options, key,
                         "sh", "-c", GROUP_JOB.format(trap=trap), "job", pids)
        elapsed = time.monotonic() - started
        found = [int(read(os.path.join(pids, name)) or 0) for name in ("job", "child", "escaped")]
        self.addCleanup(self.kill_left, found)
        return result, elapsed, found

    @staticmethod
    def kill_left(pids):
        for pid in pids:
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)

    def assertFree(self, backend, key):
        taken = self.nx(*backend.args(), "lock", "-n", key)
        self.assertEqual(taken.returncode, 0, taken.stderr)
        self.nx(*backend.args(), "unlock", "--force", key)

    def test_a_job_past_its_time_is_stopped_and_the_lock_freed(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                result, elapsed, pids = self.run_job(backend, "overrun", "")
                self.assertEqual(result.returncode, 124, result.stderr)
                self.assertIn(b"--max-runtime", result.stderr)
                self.assertGreaterEqual(elapsed, 1.0)
                self.assertLess(elapsed, 8.0)
                self.assertTrue(all(pids), pids)
                # The whole job, what left its group too, is gone when nxlock exits.
                self.assertEqual([pid for pid in pids if alive(pid)], [])
                self.assertFree(backend, "overrun")

    def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                result, elapsed, pids = self.run_job(backend, "stubborn", "trap '' TERM",
                                                     "--kill-after", "1.5")
                self.assertEqual(result.returncode, 124, result.stderr)
                # SIGTERM at 1 s, ignored; SIGKILL at 2.5 s.
                self.assertGreaterEqual(elapsed, 2.4)
                self.assertLess(elapsed, 10.0)
                self.assertEqual([pid for pid in pids if alive(pid)], [])
                self.assertFree(backend, "stubborn")

    def test_a_job_that_ends_in_time_gives_its_own_status(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                started = time.monotonic()
                result = self.nx(*backend.args(), "run-locked", "--max-runtime", "30", "intime",
                                 "sh", "-c", "exit 7")
                self.assertEqual(result.returncode, 7, result.stderr)
                self.assertLess(time.monotonic() - started, 10.0)
                self.assertEqual(result.stderr, b"")
                self.assertFree(backend, "intime")

    def test_json_says_it_timed_out(self):
        result = self.nx("--json", "run-locked", "--max-runtime", "0.2", "k", "sleep", "30")
        self.assertEqual(result.returncode, 124, result.stderr)
        self.assertIn(b'"timed_out":true', result.stdout.replace(b" ", b""))
        self.assertIn(b'"child_status":143', result.stdout.replace(b" ", b""))

    def test_zero_means_no_limit(self):
        result = self.nx("run-locked", "--max-runtime", "0", "k", "sh", "-c", "sleep 0.3; exit 3")
        self.assertEqual(result.returncode, 3, result.stderr)

    def test_bad_values_are_usage_errors(self):
        for value in ("-1", "abc", "", "1e9", "nan"):
            with self.subTest(value=value):
                result = self.nx("run-locked", "--max-runtime", value, "k", "true")
                self.assertOneLineError(result, 64, "--max-runtime")


if __name__ == "__main__":
    unittest.main()
