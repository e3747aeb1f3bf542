"""run-locked: when nxlock dies, its watchdog stops the job and then releases the lock
itself, as flock's lock goes with its holder; on every backend (harness.backends).

The next run takes the lock at once, with a higher token, and never while any part of
the old job runs; a stopped nxlock keeps its lock; nxlock and its watchdog killed
together leave it to the ttl."""
import json
import os
import signal
import subprocess
import time
import unittest

from harness import NxlockTestCase, alive, kill_with_watchdog, read, smoke, wait_for

# The job writes its shell's pid, then sleeps; `trap "" TERM` makes it (and the sleeps
# it starts, which inherit the ignored disposition) deaf to SIGTERM.
PLAIN_JOB = 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 120'
DEAF_JOB = 'trap "" TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; while :; do sleep 0.1; done'
# The job leaves a process in a session of its own, and writes that one's pid.
ESCAPING_JOB = ('setsid sh -c \'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 121\' "$0" & '
                'wait')


class DeadNxlockReleases(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def backends(self, offering="lock"):
        return super().backends(offering=offering, by_default=("file", "redis"))

    def start(self, backend, script, *options, key="k"):
        """run-locked running `script` (sh -c, its $0 a pid file); returns
        (nxlock's process, the pid the job wrote, its --json fence or None)."""
        self.started = getattr(self, "started", 0) + 1
        pidfile = os.path.join(self.tmp, "job-%d" % self.started)
        p = self.popen(*backend.args(), "--json", "run-locked", *options, key, "sh", "-c",
                       script, pidfile, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(self.stop, p)
        self.assertTrue(wait_for(lambda: read(pidfile).strip() != "", timeout=15),
                        "the job did not start")
        pid = int(read(pidfile))
        self.addCleanup(lambda: alive(pid) and os.kill(pid, signal.SIGKILL))
        # The holder's details, which name its watchdog, are written once the
        # job has run a moment (etcd: 50 ms after it starts); a kill before then
        # leaves a lock the watchdog still releases, but that says nothing of it.
        status = {}

        def recorded():
            nonlocal status
            r = self.nx(*backend.args(), "--json", "status", key)
            status = json.loads(r.stdout or b"{}")
            return "holder" in status

        self.assertTrue(wait_for(recorded, timeout=10), "no holder details: %r" % status)
        return p, pid, status.get("fence")

    def stop(self, p):
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
        p.communicate(timeout=30)

    def kill_nxlock(self, p):
        os.kill(p.pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)

    def next_run(self, backend, old_pid, *options, key="k"):
        """run-locked after the old one: (its result, its JSON, whether the old job's
        process was gone when it started)."""
        r = self.nx(*backend.args(), "--json", "run-locked", *options, key, "sh", "-c",
                    "kill -0 %d 2>/dev/null && echo alive || echo gone" % old_pid)
        lines = r.stdout.decode().splitlines()
        out = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        return r, out, "gone" in lines

    @smoke
    def test_the_next_run_takes_the_lock_as_soon_as_the_job_is_gone(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                p, pid, fence = self.start(backend, PLAIN_JOB, "-t", "60")
                self.kill_nxlock(p)
                began = time.monotonic()
                # Well within the ttl: the watchdog released it, not the clock.
                r, out, old_gone = self.next_run(backend, pid, "-w", "20")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertLess(time.monotonic() - began, 20)
                self.assertTrue(old_gone, "the next run started beside the old job")
                if fence is not None:
                    self.assertGreater(out["fence"], fence)

    def test_a_job_deaf_to_sigterm_keeps_the_lock_until_kill_after(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                p, pid, _ = self.start(backend, DEAF_JOB, "-t", "60", "--kill-after", "3")
                self.kill_nxlock(p)
                killed = time.monotonic()
                # SIGTERM is ignored: the job goes on, and with it the lock.
                self.assertTrue(alive(pid))
                r = self.nx(*backend.args(), "run-locked", "-n", "k", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                # The busy note and status say what comes: a release, not the ttl.
                self.assertIn(b"its watchdog releases the lock once the job has stopped",
                              r.stderr)
                r = self.nx(*backend.args(), "--json", "status", "k")
                holder = json.loads(r.stdout)["holder"]
                self.assertIs(holder["releasing"], True)
                self.assertIs(holder["running"], False)
                r, _, old_gone = self.next_run(backend, pid, "-w", "20")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(old_gone, "the next run started beside the old job")
                self.assertGreaterEqual(time.monotonic() - killed, 2.5)

    def test_what_left_the_jobs_session_is_stopped_before_the_release(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                p, escaped, _ = self.start(backend, ESCAPING_JOB, "-t", "60")
                self.kill_nxlock(p)
                r, _, old_gone = self.next_run(backend, escaped, "-w", "20")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(old_gone, "the next run started beside what the job left")

    def test_a_stopped_nxlock_keeps_its_lock(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                p, pid, _ = self.start(backend, PLAIN_JOB, "-t", "60")
                os.kill(p.pid, signal.SIGSTOP)
                self.addCleanup(os.kill, p.pid, signal.SIGCONT)
                # Stopped, not dead: its watchdog waits, the job runs, the lock holds.
                r = self.nx(*backend.args(), "run-locked", "-w", "1", "k", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertTrue(alive(pid))
                os.kill(p.pid, signal.SIGCONT)

    @smoke
    def test_a_stopped_nxlocks_watchdog_kills_the_job_before_the_ttl(self):
        """--on-lost kill: nxlock SIGSTOPped, its watchdog kills the job before the
        lock, renewed last before the stop, could lapse."""
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                pidfile = os.path.join(self.tmp, "pid-" + backend.name)
                job = self.popen(*backend.args(), "run-locked", "-t", "3", "--on-lost", "kill",
                                 "st", "sh", "-c", 'echo $$ > "$0"; exec sleep 30', pidfile,
                                 stderr=subprocess.DEVNULL)
                self.assertTrue(wait_for(lambda: read(pidfile).strip() != ""))
                pid = int(read(pidfile))
                job.send_signal(signal.SIGSTOP)
                started = time.monotonic()
                try:
                    self.assertTrue(wait_for(lambda: not alive(pid), timeout=10, interval=0.01))
                    # Killed before the lock (3 s from the last renewal, sent before
                    # the stop) could lapse.
                    self.assertLess(time.monotonic() - started, 3.0)
                    # (Whether the key is still there when the test looks is a race by
                    # design: the kill comes a tenth of a second before it may lapse.)
                finally:
                    job.send_signal(signal.SIGCONT)
                self.assertEqual(job.wait(timeout=20), 79)

    def test_nxlock_and_its_watchdog_killed_together_leave_the_lock_to_its_ttl(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                # -t 30: a loaded machine still finds it held below, long after the
                # watchdog would have released it.
                p, pid, _ = self.start(backend, PLAIN_JOB, "-t", "30")
                watchdog = kill_with_watchdog(p.pid)
                p.wait(timeout=10)
                # The job dies with its watchdog (its parent-death signal)...
                self.assertTrue(wait_for(lambda: not alive(pid)), "the job outlived both")
                # ...and the lock stays until it expires, which status and the busy
                # note say.
                r = self.nx(*backend.args(), "--json", "status", "k")
                self.assertEqual(r.returncode, 0, (r.stdout, r.stderr, watchdog))
                holder = json.loads(r.stdout)["holder"]
                self.assertIs(holder["running"], False)
                self.assertNotIn("releasing", holder)
                r = self.nx(*backend.args(), "run-locked", "-w", "1", "k", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"no longer running", r.stderr)
                self.assertIn(b"until it expires", r.stderr)
                r = self.nx(*backend.args(), "unlock", "--force", "k")
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_run_in_its_hold_keeps_the_hold(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                started = time.time()
                p, pid, _ = self.start(backend, PLAIN_JOB, "-t", "60", "--hold", "4")
                self.kill_nxlock(p)
                self.assertTrue(wait_for(lambda: not alive(pid)), "the job outlived nxlock")
                # Released by the watchdog as nxlock releases a job that ran: kept
                # until the hold's end, then free.
                r = self.nx(*backend.args(), "run-locked", "-n", "k", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                r = self.nx(*backend.args(), "run-locked", "-w", "20", "k", "true")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreaterEqual(time.time() - started, 4)
                self.assertLess(time.time() - started, 20)


if __name__ == "__main__":
    unittest.main()
