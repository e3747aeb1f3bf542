"""run-locked's lost-lock policy, stage by stage, with the time each signal reaches the job.

The job (lost_policy_job.py) logs each signal it gets and a heartbeat, against
CLOCK_MONOTONIC, which this test reads too. Each test runs its case on every
backend at once (in threads: harness.backends) and then checks each.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

from harness import (BIN, COMMAND_TIMEOUT, NxlockTestCase, alive, dying_with_parent, smoke,
                     wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "lost_policy_job.py")
TTL = 3
INTERVAL = TTL / 3  # how often run-locked renews, so how late it may notice a loss
# Long enough that SIGKILL --kill-after (2 s) after a loss found at a renewal still
# comes before the lock could expire, so the grace is not cut short.
GRACE_TTL = 6
MARGIN = 1.5  # slack for a loaded machine on every timing bound
KILLED = 128 + signal.SIGKILL


class JobLog:
    """One process's log: its pid, start, heartbeat and signals (times are monotonic)."""

    def __init__(self, path):
        self.pid = None
        self.start = None
        self.ticks = []
        self.signals = []  # (signo, time)
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            words = line.split()
            if words[0] == "start":
                self.pid, self.start = int(words[1]), float(words[2])
            elif words[0] == "tick":
                self.ticks.append(float(words[1]))
            elif words[0] == "signal":
                self.signals.append((int(words[1]), float(words[2])))

    def signal_times(self, signo):
        return [t for s, t in self.signals if s == signo]

    def last_tick(self):
        return self.ticks[-1] if self.ticks else None


class Run:
    """What one run-locked of the job did, measured; the test asserts on it later."""

    def __init__(self, backend):
        self.backend = backend
        self.status = None
        self.launched = None  # monotonic time nxlock was started: it acquires after that
        self.exited_at = None  # monotonic time nxlock exited; None if it had to be killed
        self.report = {}  # the --json object
        self.stderr = []  # (time, line)
        self.taken_away = None  # (before, after) the other client took the lock
        self.other_value = None  # what the other client left in the key
        self.after_run = None  # `get KEY` once nxlock has exited
        self.child = JobLog("/nonexistent")
        self.grandchild = JobLog("/nonexistent")
        self.error = None

    def stderr_text(self):
        return "".join(line for _, line in self.stderr)

    def first_stderr(self, fragment):
        return next((t for t, line in self.stderr if fragment in line), None)


class LostPolicy(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def take_away(self, backend, key, value):
        """Another client overwrites the lock: Redis's own SET, or nxlock's getset on the store."""
        if backend.name == "redis":
            self.redis.cli("-n", "1", "SET", key, value)
        else:
            r = self.nx(*backend.args(), "getset", key, value)
            assert r.returncode == 0, r.stderr

    def run_job(self, backend, options, job_options, how="overwrite", grandchild=False,
                finish_when_lost=False, exit_within=20, key="job"):
        """Runs `run-locked OPTIONS job JOB_OPTIONS`, takes its lock away, waits for the end.

        how: "overwrite" writes another value into the key once the job runs;
        "expire" (for --no-renew) takes the lock with `lock -n` as soon as it is free.
        finish_when_lost: the job is told to finish once nxlock reports the loss
        and the job has run on a little (for --on-lost ignore).
        """
        run = Run(backend)
        logdir = os.path.join(self.tmp, backend.name + "-" + key)
        os.makedirs(logdir)
        job = [sys.executable, JOB, logdir] + list(job_options)
        if grandchild:
            job.append("--grandchild")
        if finish_when_lost:
            job.append("--finish")
        run.launched = time.monotonic()
        p = subprocess.Popen(
            dying_with_parent([BIN, *backend.args(), "--json", "run-locked", *options, key, *job]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)

        def read_stderr():
            for line in p.stderr:
                run.stderr.append((time.monotonic(), line.decode(errors="replace")))

        def wait_exit():
            p.wait()
            run.exited_at = time.monotonic()

        readers = [threading.Thread(target=read_stderr), threading.Thread(target=wait_exit)]
        for thread in readers:
            thread.start()
        child_log = os.path.join(logdir, "child.log")
        grandchild_log = os.path.join(logdir, "grandchild.log")
        try:
            started = wait_for(lambda: JobLog(child_log).start and (
                not grandchild or JobLog(grandchild_log).start), timeout=15)
            if not started:
                raise AssertionError("the job did not start: " + run.stderr_text())
            if how == "overwrite":
                run.other_value = str(int(time.time()) + 600)
                before = time.monotonic()
                self.take_away(backend, key, run.other_value)
                run.taken_away = (before, time.monotonic())
            else:
                # --no-renew: the lock is free once it expires; take it the moment it is.
                def take():
                    before = time.monotonic()
                    r = self.nx(*backend.args(), "lock", "-n", "-t", "600", key)
                    if r.returncode == 0:
                        run.taken_away = (before, time.monotonic())
                        run.other_value = r.stdout.decode().strip()
                    return r.returncode == 0
                wait_for(take, TTL + 10, interval=0.05)
            if finish_when_lost:
                # Once nxlock has said the lock is lost, the job must run on undisturbed.
                if wait_for(lambda: run.first_stderr("lost") is not None, timeout=TTL + 10):
                    noticed = run.first_stderr("lost")
                    wait_for(lambda: (JobLog(child_log).last_tick() or 0) > noticed + 0.3,
                             timeout=10)
                with open(os.path.join(logdir, "finish"), "w"):
                    pass
            if wait_for(lambda: run.exited_at is not None, timeout=exit_within):
                run.status = p.returncode
        finally:
            if p.poll() is None:
                p.kill()  # its watchdog then stops the whole job
            readers[1].join()
            run.child = JobLog(child_log)
            run.grandchild = JobLog(grandchild_log)
            for log in (run.child, run.grandchild):
                # A process SIGKILLed with its group may take a moment to be gone.
                if log.pid and not wait_for(lambda: not alive(log.pid), timeout=5):
                    run.error = "process %d outlived nxlock" % log.pid
                    os.kill(log.pid, signal.SIGKILL)
            # Only now: a survivor holding nxlock's stdout or stderr would block the reads.
            for thread in readers:
                thread.join(timeout=COMMAND_TIMEOUT)
            run.report = json.loads(p.stdout.read() or b"{}")
            p.stdout.close()
            p.stderr.close()
        got = self.nx(*backend.args(), "get", key)
        run.after_run = got.stdout.decode().strip() if got.returncode == 0 else None
        return run

    def on_both_backends(self, *args, **kwargs):
        """run_job on every backend at the same time (by default the embedded store and
        Redis over TCP; the lock is taken away by a page client's GETSET, or Redis's own
        SET); returns the runs."""
        runs = {}
        failures = {}

        def one(backend):
            try:
                runs[backend.name] = self.run_job(backend, *args, **kwargs)
            except Exception as e:  # reported by the test thread below
                failures[backend.name] = e

        backends = self.backends(offering="kv", by_default=("file", "redis"))
        threads = [threading.Thread(target=one, args=(b,)) for b in backends]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name, e in failures.items():
            raise AssertionError("%s: %r" % (name, e)) from e
        return [runs[b.name] for b in backends]

    def describe(self, run):
        return "\nstatus %s, json %s\nstderr:\n%s\nchild signals %s, grandchild signals %s" % (
            run.status, run.report, run.stderr_text(), run.child.signals,
            run.grandchild.signals)

    def assertLostAndStopped(self, run, child_status):
        """Exit 79, the loss reported, the child's own ending in --json, the new holder kept."""
        why = self.describe(run)
        self.assertIsNone(run.error, why)
        self.assertEqual(run.status, 79, why)
        self.assertIn("lost", run.stderr_text(), why)
        self.assertEqual(run.report.get("lost"), True, why)
        self.assertEqual(run.report.get("child_status"), child_status, why)
        self.assertEqual(run.after_run, run.other_value, "the other client's lock is left alone")

    @smoke
    def test_sigterm_within_one_renewal_interval(self):
        # The job exits 3 on SIGTERM; kill-after is long, so only SIGTERM can end it in time.
        for run in self.on_both_backends(["-t", str(TTL), "--kill-after", "10"],
                                         ["--on-term", "exit:3"]):
            with self.subTest(backend=run.backend.name):
                why = self.describe(run)
                terms = run.child.signal_times(signal.SIGTERM)
                self.assertEqual(len(terms), 1, "one SIGTERM" + why)
                before, after = run.taken_away
                self.assertGreaterEqual(terms[0], before, "no SIGTERM before the loss" + why)
                self.assertLessEqual(terms[0] - after, INTERVAL + MARGIN,
                                     "SIGTERM within one renewal interval of the loss" + why)
                self.assertEqual([s for s, _ in run.child.signals], [signal.SIGTERM], why)
                self.assertLostAndStopped(run, child_status=3)

    def test_sigkill_after_the_grace_period(self):
        # The job traps SIGTERM and runs on: only SIGKILL, --kill-after later, ends it.
        grace = 2
        for run in self.on_both_backends(["-t", str(GRACE_TTL), "--kill-after", str(grace)],
                                         ["--on-term", "keep"]):
            with self.subTest(backend=run.backend.name):
                why = self.describe(run)
                terms = run.child.signal_times(signal.SIGTERM)
                self.assertEqual(len(terms), 1, "one SIGTERM" + why)
                self.assertGreaterEqual(run.child.last_tick(), terms[0] + grace * 0.75,
                                        "the job still ran %.2f s after SIGTERM" % (grace * 0.75)
                                        + why)
                self.assertIsNotNone(run.exited_at, "the job was never killed" + why)
                self.assertLessEqual(run.exited_at - terms[0], grace + MARGIN,
                                     "SIGKILL came --kill-after (%d s) after SIGTERM" % grace
                                     + why)
                self.assertLostAndStopped(run, child_status=KILLED)

    def test_on_lost_kill_skips_sigterm(self):
        # The grace would be 30 s: a job dead within an interval had SIGKILL at once.
        for run in self.on_both_backends(
                ["-t", str(TTL), "--on-lost", "kill", "--kill-after", "30"],
                ["--on-term", "keep"], grandchild=True, exit_within=10):
            with self.subTest(backend=run.backend.name):
                why = self.describe(run)
                self.assertEqual(run.child.signals, [], "no SIGTERM, no signal it can see" + why)
                self.assertEqual(run.grandchild.signals, [], "nor the grandchild" + why)
                self.assertIsNotNone(run.exited_at, "the job was never killed" + why)
                before, after = run.taken_away
                for log in (run.child, run.grandchild):
                    self.assertLessEqual(log.last_tick() - after, INTERVAL + MARGIN,
                                         "SIGKILL within one renewal interval" + why)
                self.assertLessEqual(run.exited_at - after, INTERVAL + MARGIN, why)
                self.assertLostAndStopped(run, child_status=KILLED)

    def test_on_lost_ignore_only_warns(self):
        for run in self.on_both_backends(["-t", str(TTL), "--on-lost", "ignore"],
                                         ["--on-term", "keep", "--exit", "5"], grandchild=True,
                                         finish_when_lost=True):
            with self.subTest(backend=run.backend.name):
                why = self.describe(run)
                self.assertIsNone(run.error, why)
                noticed = run.first_stderr("lost")
                self.assertIsNotNone(noticed, "the loss is reported" + why)
                self.assertIn("--on-lost ignore", run.stderr_text(), why)
                self.assertEqual(run.child.signals, [], "no signal" + why)
                self.assertEqual(run.grandchild.signals, [], "no signal" + why)
                self.assertGreater(run.child.last_tick(), noticed + 0.3,
                                   "the job ran on after the loss" + why)
                self.assertEqual(run.status, 5, "the child's own status" + why)
                self.assertEqual(run.report.get("lost"), True, why)
                self.assertEqual(run.report.get("child_status"), 5, why)
                self.assertEqual(run.after_run, run.other_value)

    def test_grandchild_gets_the_same_signals(self):
        grace = 2
        for run in self.on_both_backends(["-t", str(GRACE_TTL), "--kill-after", str(grace)],
                                         ["--on-term", "keep"], grandchild=True):
            with self.subTest(backend=run.backend.name):
                why = self.describe(run)
                child_terms = run.child.signal_times(signal.SIGTERM)
                terms = run.grandchild.signal_times(signal.SIGTERM)
                self.assertEqual(len(terms), 1, "the grandchild got SIGTERM" + why)
                self.assertEqual(len(child_terms), 1, why)
                self.assertLess(abs(terms[0] - child_terms[0]), MARGIN,
                                "with the child" + why)
                self.assertGreaterEqual(run.grandchild.last_tick(), terms[0] + grace * 0.75,
                                        "the grandchild had the grace period too" + why)
                self.assertIsNotNone(run.exited_at, why)
                self.assertLessEqual(run.grandchild.last_tick() - terms[0], grace + MARGIN,
                                     "the grandchild got SIGKILL with the child" + why)
                self.assertLostAndStopped(run, child_status=KILLED)

    def test_no_renew_loses_the_lock_at_expiry(self):
        # Not renewed, the lock expires; another client takes it. `term`: the job
        # is stopped before the lock could expire, its grace cut short to fit in.
        ttl = 2
        term_ttl = 6  # time for two jobs to start on a loaded machine before the stop
        kill_after = 3
        # SIGTERM this long before the deadline (ttl after the acquisition): the
        # kill margin (0.1 s) and the grace, at most a fifteenth of the ttl or
        # 0.3 s, whichever is more.
        lead = 0.1 + min(kill_after, max(term_ttl / 15, 0.3))
        cases = {
            "term": (["--no-renew", "-t", str(term_ttl), "--kill-after", str(kill_after)],
                     ["--on-term", "keep"], {"key": "term"}),
            "ignore": (["--no-renew", "-t", str(ttl), "--on-lost", "ignore"],
                       ["--on-term", "keep", "--exit", "5"],
                       {"finish_when_lost": True, "key": "ignore"}),
        }
        results = {}

        def run_case(name):
            options, job_options, extra = cases[name]
            results[name] = self.on_both_backends(options, job_options, how="expire", **extra)

        threads = [threading.Thread(target=run_case, args=(name,)) for name in cases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name in cases:
            self.assertIn(name, results, "case %s failed to run" % name)
        for run in results["term"]:
            with self.subTest(backend=run.backend.name, on_lost="term"):
                why = self.describe(run)
                self.assertIsNotNone(run.taken_away, "another client took the lock" + why)
                self.assertIn("--no-renew", run.stderr_text(), "nxlock says why" + why)
                self.assertIn("cut short", run.stderr_text(), "and that the grace is" + why)
                terms = run.child.signal_times(signal.SIGTERM)
                self.assertEqual(len(terms), 1, "SIGTERM before the expiry" + why)
                # The acquisition came after the launch (not after the job's
                # first log line: that can lag a second).
                self.assertGreaterEqual(terms[0], run.launched + term_ttl - lead - 0.1,
                                        "not before the ttl nearly ran out" + why)
                # SIGKILL ended the job before another client could take the lock.
                self.assertLess(run.child.last_tick(), run.taken_away[1],
                                "the job was gone before another client took the lock" + why)
                self.assertLostAndStopped(run, child_status=KILLED)
        for run in results["ignore"]:
            with self.subTest(backend=run.backend.name, on_lost="ignore"):
                why = self.describe(run)
                self.assertIsNotNone(run.taken_away, "another client took the lock" + why)
                self.assertIn("expired", run.stderr_text(), "nxlock says it expired" + why)
                self.assertEqual(run.child.signals, [], "no signal" + why)
                self.assertEqual(run.status, 5, "the child's own status" + why)
                self.assertEqual(run.after_run, run.other_value)


if __name__ == "__main__":
    unittest.main()
