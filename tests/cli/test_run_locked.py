"""run-locked: exit statuses, environment, signals, renewal, a lost lock, nxlock's own death."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest

from harness import (BIN, NxlockTestCase, alive, die_with_parent, read, smoke,
                     trace_shows_release, wait_for)


def children_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def sleepers_under(pid):
    """The live `sleep` processes among the descendants of pid (found by parentage, not name)."""
    found, todo = [], children_of(pid)
    while todo:
        child = todo.pop()
        todo.extend(children_of(child))
        try:
            with open("/proc/%d/comm" % child) as f:
                if f.read().strip() == "sleep" and alive(child):
                    found.append(child)
        except FileNotFoundError:
            pass
    return found


def kill_all(pids):
    """Cleanup: SIGKILL the processes this test started that still run."""
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def stop(process):
    """Cleanup: SIGKILL a process the test started, if it still runs, and reap it."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


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

    def test_every_forwarded_signal_reaches_the_child(self):
        # The job sets its own handlers: a shell cannot trap a signal it started
        # with ignored (`nohup`, `cmd &` in a script), and the test must not
        # depend on how it was started. nxlock itself is started both with the
        # default dispositions and with all six ignored, as nohup and `&` leave
        # some of them: it must forward them either way.
        forwarded = [signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT,
                     signal.SIGUSR1, signal.SIGUSR2]
        job = textwrap.dedent("""
            import os, signal, sys, time
            log, ready, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
            got = []
            def on(signo, frame):
                got.append(signo)
                with open(log, "a") as f:
                    f.write("%d\\n" % signo)
                if len(got) == count:
                    os._exit(7)
            for name in ("SIGHUP", "SIGINT", "SIGTERM", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
                signal.signal(getattr(signal, name), on)
            open(ready, "w").close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.05)  # a bound: the child lives 60 s at most
            os._exit(3)
            """)

        def start_with(disposition):
            def preexec():
                die_with_parent()
                for signo in forwarded:
                    signal.signal(signo, disposition)
            return preexec

        for backend in self.backends_named("file", "redis"):
            for disposition in (signal.SIG_DFL, signal.SIG_IGN):
                with self.subTest(backend=backend.name, inherited=disposition.name):
                    tag = "%s-%s" % (backend.name, disposition.name)
                    log = os.path.join(self.tmp, "got-" + tag)
                    ready = os.path.join(self.tmp, "ready-" + tag)
                    key = "job-" + tag  # a failed case leaves its lock held: not in the way
                    p = self.popen(*backend.args(), "run-locked", key, sys.executable, "-c", job,
                                   log, ready, str(len(forwarded)),
                                   preexec_fn=start_with(disposition))
                    self.addCleanup(stop, p)
                    self.assertTrue(wait_for(lambda: os.path.exists(ready)), "the job started")
                    for signo in forwarded:
                        p.send_signal(signo)
                        self.assertTrue(
                            wait_for(lambda: str(int(signo)) in read(log).split(), timeout=5),
                            "%s did not reach the job (it got: %s; nxlock %s)"
                            % (signo.name, read(log).split(), "alive" if p.poll() is None
                               else "exited %s" % p.returncode))
                    self.assertEqual(p.wait(timeout=10), 7)
                    self.assertEqual(read(log).split(), [str(int(s)) for s in forwarded])
                    self.assertFree(backend, key)

    @smoke
    def test_a_signal_the_job_traps_ends_it_and_the_lock_is_released(self):
        """No thread of nxlock (a quorum's server workers, a watch) takes a signal meant
        for the job: run-locked forwards it, on every backend."""
        ready = os.path.join(self.tmp, "ready")
        got = os.path.join(self.tmp, "got")
        for backend in self.backends(offering="lock"):
            for signo in (signal.SIGTERM, signal.SIGUSR1):
                with self.subTest(backend=backend.name, signal=signo):
                    for path in (ready, got):
                        if os.path.exists(path):
                            os.unlink(path)
                    job = self.popen(*backend.args(), "run-locked", "job", "sh", "-c",
                                     'trap "echo $2 > $1; exit 7" %s; touch "$0"; '
                                     'while :; do sleep 0.05; done'
                                     % signal.Signals(signo).name[3:],
                                     ready, got, "caught", stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
                    self.assertTrue(wait_for(lambda: os.path.exists(ready), timeout=20))
                    job.send_signal(signo)
                    _, err = job.communicate(timeout=30)
                    self.assertEqual(job.returncode, 7, err)
                    self.assertEqual(read(got).strip(), "caught")
                    self.assertEqual(backend.values("job"), [None] * backend.copies, "released")

    def test_renewal_keeps_the_lock_past_twice_the_ttl(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                trace = os.path.join(self.tmp, "job-%s.err" % backend.name)
                with open(trace, "wb") as err:
                    p = self.popen(*u, "-v", "run-locked", "-t", "1", "job", "sleep", "6.5",
                                   stderr=err)
                self.assertTrue(wait_for(lambda: self.nx(*u, "status", "job").returncode == 0))
                # Held past twice the ttl: refused by a try that began 2.5 s after
                # the job was seen holding (a slow machine makes tries few, not late).
                latest_refusal = None
                start = time.monotonic()
                # Room for a try after 2.5 s even when each takes a second (ASan, load).
                while p.poll() is None and time.monotonic() - start < 6:
                    began = time.monotonic() - start
                    r = self.nx(*u, "--json", "lock", "-n", "job")
                    if r.returncode == 0:
                        # Only right if the job had ended and released, and run-locked
                        # was still on its way out.
                        self.assertEqual(p.wait(timeout=20), 0)
                        self.assertTrue(trace_shows_release(trace, "job"),
                                        "lock taken while the job runs: " + read(trace))
                        self.nx(*u, "unlock", "job", json.loads(r.stdout)["value"])
                        break
                    self.assertEqual(r.returncode, 75, r.stderr)
                    latest_refusal = began
                    time.sleep(0.4)  # the polls' interval; the loop is bound to 6 s
                self.assertEqual(p.wait(timeout=20), 0)
                self.assertGreaterEqual(latest_refusal or 0, 2.5)
                self.assertFree(backend)

    def test_renewal_leaves_no_gap_and_keeps_two_thirds_of_the_ttl(self):
        # Another client polls throughout: never a moment in which it could take
        # the lock, and the time left on it, as that client sees it ("held until"),
        # never drops much below what renewing every ttl/3 leaves. With ttl 6 the
        # value is floor(renewal)+7, renewed every 2 s: at least 5 s left, 4 with
        # a second of scheduling slack; renewing once per ttl lets it fall to 3 for
        # the whole fifth second, and to 1 later.
        ttl = 6
        failures = []

        def watch(backend):
            u = backend.args()
            trace = os.path.join(self.tmp, "job-%s.err" % backend.name)
            with open(trace, "wb") as err:
                # Longer than the polls need: under ASan and load a poll takes a second.
                p = self.popen(*u, "-v", "run-locked", "-t", str(ttl), "job", "sleep", "9",
                               stderr=err)
            try:
                if not wait_for(lambda: self.nx(*u, "status", "job").returncode == 0):
                    failures.append("%s: the job never took the lock" % backend.name)
                    return
                least, polls, latest_poll = None, 0, 0
                start = time.monotonic()
                while p.poll() is None:
                    began = time.monotonic() - start
                    r = self.nx(*u, "--json", "lock", "-n", "job")
                    if r.returncode == 0:
                        if p.wait(timeout=20) == 0 and trace_shows_release(trace, "job"):
                            # The job had ended and released; run-locked was on its way out.
                            self.nx(*u, "unlock", "job", json.loads(r.stdout)["value"])
                            break
                        failures.append("%s: another client took the lock while the job "
                                        "ran (after %d polls) %s"
                                        % (backend.name, polls, r.stdout))
                        return
                    if p.poll() is not None:
                        break  # ended while we asked: a refusal now proves nothing
                    if r.returncode != 75:
                        failures.append("%s: a poll while the job ran failed "
                                        "(exit %d after %d polls) %s"
                                        % (backend.name, r.returncode, polls, r.stdout))
                        return
                    # held_until minus the whole second now: the page's "value - now".
                    left = json.loads(r.stdout)["seconds_left"]
                    least = left if least is None else min(least, left)
                    polls += 1
                    latest_poll = began
                    time.sleep(0.05)  # the polls' interval; the job's end bounds the loop
                if p.wait(timeout=20) != 0:
                    failures.append("%s: the job failed" % backend.name)
                # The polls must reach the fifth second, where renewing only once
                # per ttl would show; how many there are depends on the machine.
                if polls < 5 or latest_poll < 4:
                    failures.append("%s: only %d polls, the last %.1f s in"
                                    % (backend.name, polls, latest_poll))
                if least is None or least < ttl - 2:
                    failures.append("%s: the lock came within %s s of expiring (ttl %d)"
                                    % (backend.name, least, ttl))
                print("\n%s: %d polls, never free, at least %s s left" % (backend.name, polls,
                                                                          least))
            finally:
                stop(p)

        threads = [threading.Thread(target=watch, args=(b,)) for b in self.backends_named("file", "redis")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual(failures, [])
        for backend in self.backends_named("file", "redis"):
            self.assertFree(backend)

    def test_lost_lock_stops_the_whole_pipeline(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                p = self.popen(*u, "run-locked", "-t", "3", "--kill-after", "1", "job",
                               "sh", "-c", "sleep 100 | sleep 100", stderr=subprocess.PIPE)
                members = []
                self.addCleanup(kill_all, members)
                self.assertTrue(wait_for(lambda: len(sleepers_under(p.pid)) == 2))
                members.extend(sleepers_under(p.pid))
                # Another client breaks in: the lock now holds someone else's value.
                self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)
                self.assertEqual(self.nx(*u, "lock", "-t", "60", "job").returncode, 0)
                status = p.wait(timeout=15)
                err = p.stderr.read().decode()
                p.stderr.close()
                self.assertEqual(status, 79, err)
                self.assertIn("lost", err)
                self.assertTrue(wait_for(lambda: not any(alive(m) for m in members), timeout=5),
                                "pipeline members survived: %s" % [m for m in members if alive(m)])
                # The new holder's lock was left alone.
                self.assertEqual(self.nx(*u, "status", "job").returncode, 0)

    def test_sigkill_of_nxlock_leaves_no_child(self):
        # Not just the direct child: a grandchild (a pipeline member, a `&` job) too.
        for backend in self.backends_named("file", "redis"):
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
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                r = subprocess.run([sys.executable, "-c", checker, BIN, *backend.args(),
                                    "run-locked", "job", "true"],
                                   env=self.env, capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.strip(), b"nothing left")

    def test_signal_while_waiting_ends_cleanly(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                value = self.nx(*u, "lock", "job").stdout.decode().strip()
                marker = os.path.join(self.tmp, "started-" + backend.name)
                trace = os.path.join(self.tmp, "trace-" + backend.name)
                with open(trace, "wb") as err:
                    p = self.popen(*u, "-v", "run-locked", "job", "touch", marker, stderr=err)
                self.addCleanup(stop, p)
                # Waiting: it has found the lock held (SETNX → 0, then GET).
                self.assertTrue(wait_for(lambda: "GET" in read(trace)), read(trace))
                self.assertIsNone(p.poll(), "run-locked waits for the lock")
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(timeout=5), 128 + signal.SIGTERM)
                self.assertFalse(os.path.exists(marker))
                self.assertEqual(self.nx(*u, "get", "job").stdout.decode().strip(), value)

    def test_the_lock_goes_when_the_job_ends_before_the_watchdog_reports(self):
        # nxlock sees the job's end itself (a pidfd) and releases at once; the
        # watchdog's report of the status comes after. Here the job stops its
        # watchdog ($PPID) and exits: the lock must be free while the status
        # cannot come, and the status must still be the job's once it does.
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                pidfile = os.path.join(self.tmp, "watchdog-" + backend.name)
                p = self.popen(*u, "run-locked", "job", "sh", "-c",
                               'echo $PPID > "$0.tmp"; mv "$0.tmp" "$0"; kill -STOP $PPID; exit 6',
                               pidfile)
                self.addCleanup(stop, p)
                self.assertTrue(wait_for(lambda: read(pidfile).strip() != ""))
                watchdog = int(read(pidfile))
                self.addCleanup(lambda: alive(watchdog) and os.kill(watchdog, signal.SIGCONT))
                self.assertTrue(wait_for(lambda: self.nx(*u, "status", "job").returncode == 1,
                                         timeout=10), "released while the watchdog is stopped")
                self.assertIsNone(p.poll(), "run-locked waits for the job's status")
                os.kill(watchdog, signal.SIGCONT)
                self.assertEqual(p.wait(timeout=10), 6)

    def test_a_waiter_has_its_watchdog_before_the_lock_comes(self):
        # The watchdog is forked before the wait, so that none is forked
        # between the lock and the job. Waiting or giving up, nothing of it is
        # left behind; and if it is gone when the lock comes, the job is not
        # run without it, and the lock goes back at once.
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.assertEqual(self.nx(*u, "lock", "job").returncode, 0)
                marker = os.path.join(self.tmp, "ran-" + backend.name)

                # Gives up: exits 75 at once and leaves no process.
                with open(os.devnull, "wb") as null:
                    p = self.popen(*u, "run-locked", "-w", "0.5", "job", "touch", marker,
                                   stderr=null)
                self.addCleanup(stop, p)
                watchdogs = []
                self.assertTrue(wait_for(lambda: watchdogs.extend(
                    c for c in children_of(p.pid) if read("/proc/%d/comm" % c).strip()
                    == "nxl-watchdog") or watchdogs), "the waiter's watchdog runs")
                self.assertEqual(p.wait(timeout=10), 75)
                self.assertTrue(wait_for(lambda: not alive(watchdogs[0]), timeout=5))

                # Its watchdog killed while it waits: no job, the lock released.
                trace = os.path.join(self.tmp, "trace-" + backend.name)
                with open(trace, "wb") as err:
                    p = self.popen(*u, "-v", "run-locked", "job", "touch", marker, stderr=err)
                self.addCleanup(stop, p)
                watchdogs = []
                self.assertTrue(wait_for(lambda: watchdogs.extend(children_of(p.pid))
                                         or watchdogs))
                os.kill(watchdogs[0], signal.SIGKILL)
                self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)
                self.assertEqual(p.wait(timeout=10), 70, read(trace))
                self.assertIn("the watchdog died before the job started", read(trace))
                self.assertFalse(os.path.exists(marker))
                self.assertFree(backend)

    def test_on_lost_ignore_keeps_the_child(self):
        backend = self.backend_named("file")
        u = backend.args()
        started = os.path.join(self.tmp, "started")
        p = self.popen(*u, "run-locked", "-t", "3", "--on-lost", "ignore", "job", "sh", "-c",
                       'touch "$0"; sleep 2.5; exit 5', started, stderr=subprocess.PIPE)
        self.addCleanup(stop, p)
        self.assertTrue(wait_for(lambda: os.path.exists(started)), "the job started")
        self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)
        self.assertEqual(self.nx(*u, "lock", "-t", "60", "job").returncode, 0)
        self.assertEqual(p.wait(timeout=15), 5)
        self.assertIn(b"lost", p.stderr.read())
        p.stderr.close()


if __name__ == "__main__":
    unittest.main()
