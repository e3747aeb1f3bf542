"""run-locked: no part of the job outlives nxlock, however nxlock is SIGKILLed, nor
its lock; not even a part that leaves the job's process group (setsid, setpgid)."""
import os
import signal
import subprocess
import unittest

from harness import (BIN, NxlockTestCase, alive, descendants, die_with_parent, proc_stat, read,
                     wait_for)


class JobDiesWithNxlock(NxlockTestCase):
    """No part of the job outlives nxlock, however nxlock is SIGKILLed."""

    def start_job(self, launcher, **popen_args):
        """Runs a job of two `&` grandchildren under run-locked; returns (process, pids)."""
        pidfile = os.path.join(self.tmp, "pids")
        script = ('sleep 105 & echo $! >> {f}.tmp; sleep 106 & echo $! >> {f}.tmp; '
                  'mv {f}.tmp {f}; wait').format(f=pidfile)
        p = subprocess.Popen([*launcher, BIN, "run-locked", "-t", "5", "k", "sh", "-c", script],
                             env=self.env, stdout=subprocess.DEVNULL, **popen_args)
        self.addCleanup(self.reap, p)
        self.assertTrue(wait_for(lambda: len(read(pidfile).split()) == 2),
                        "the job did not start")
        pids = [int(pid) for pid in read(pidfile).split()]
        # Whatever happens, stop what we started (by pid, and only if it is still ours).
        self.addCleanup(lambda: [os.kill(pid, signal.SIGKILL) for pid in pids
                                 if alive(pid, "sleep")])
        # `echo $!` may run before the forked shell has exec'd sleep: wait for it.
        self.assertTrue(wait_for(lambda: all(alive(pid, "sleep") for pid in pids)),
                        "the job's sleeps did not start")
        return p, pids

    def reap(self, p):
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)

    def assertJobGone(self, pids):
        for pid in pids:
            self.assertTrue(wait_for(lambda: not alive(pid, "sleep"), timeout=10),
                            "job process %d outlived nxlock" % pid)
        # ...and the lock it held is free for the next holder (or expires: -t 5).
        r = self.nx("run-locked", "-w", "10", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_timeout_s_kill(self):
        # timeout(1) puts itself and nxlock in a new process group, SIGKILLs nxlock,
        # then the whole group (itself included).
        p, pids = self.start_job(["timeout", "-s", "KILL", "3"], preexec_fn=die_with_parent)
        self.assertIn(p.wait(timeout=20), (-signal.SIGKILL, 128 + signal.SIGKILL))
        self.assertJobGone(pids)

    def test_kill_9_process_group(self):
        p, pids = self.start_job([], start_new_session=True)
        os.killpg(p.pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)
        self.assertJobGone(pids)

    def test_sigkill_to_every_process_named_nxlock(self):
        # What `killall -9 nxlock` does, limited to the processes this test started.
        p, pids = self.start_job([], start_new_session=True)
        named = [pid for pid in descendants(os.getpid())
                 if (proc_stat(pid) or ("",))[0] == "nxlock"]
        self.assertIn(p.pid, named)
        # Stopped first, so that they all die at once, as far as the others can tell.
        for pid in named:
            os.kill(pid, signal.SIGSTOP)
        for pid in named:
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)
        self.assertJobGone(pids)


# Each starts a long sleeper outside the job's process group, writes its pid, and waits
# (the sleepers' lengths are bounds the test never reaches: it kills them).
ESCAPES = {
    "setsid": 'setsid sleep 301 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait',
    "setpgid": ('python3 -c "import os, time; os.setpgid(0, 0); time.sleep(302)" & '
                'echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait'),
}


class EscapedJobDiesWithTheLock(NxlockTestCase):
    """A part of the job that left its process group dies with nxlock and with the lock."""

    def start(self, escape, *options, key="k"):
        """run-locked in a session of its own, running ESCAPES[escape]; returns (process, escapee)."""
        self.started = getattr(self, "started", 0) + 1
        pidfile = os.path.join(self.tmp, "escapee-%s-%d" % (escape, self.started))
        p = subprocess.Popen([BIN, "run-locked", "-t", "3", *options, key, "sh", "-c",
                              ESCAPES[escape], pidfile], env=self.env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=die_with_parent)
        self.addCleanup(self.reap, p)
        self.assertTrue(wait_for(lambda: read(pidfile).strip() != ""), "the job did not start")
        escapee = int(read(pidfile))
        self.addCleanup(self.stop_escapee, escapee)
        # It has left the job's process group once it leads a group of its own.
        self.assertTrue(wait_for(lambda: alive(escapee) and os.getpgid(escapee) == escapee),
                        "the job's part did not leave its process group")
        return p, escapee

    def reap(self, p):
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)
        p.stderr.close()

    def stop_escapee(self, pid):
        # Only a process of ours that still runs (never a reused pid of someone else's).
        if alive(pid) and os.getsid(pid) != os.getsid(0) and read("/proc/%d/cmdline" % pid).find(
                "30") >= 0:
            os.kill(pid, signal.SIGKILL)

    def assertGone(self, pid):
        self.assertTrue(wait_for(lambda: not alive(pid), timeout=10),
                        "process %d that left the job's group outlived the lock" % pid)

    def test_sigkill_of_nxlocks_process_group(self):
        for escape in ESCAPES:
            with self.subTest(escape=escape):
                p, escapee = self.start(escape)
                os.killpg(p.pid, signal.SIGKILL)
                self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)
                self.assertGone(escapee)

    def test_sigkill_of_nxlock_alone(self):
        p, escapee = self.start("setsid")
        p.kill()
        self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)
        self.assertGone(escapee)

    def test_lost_lock_stops_it_too(self):
        for policy in ("term", "kill"):
            with self.subTest(policy=policy):
                key = "lost-" + policy
                p, escapee = self.start("setsid", "--on-lost", policy, "--kill-after", "1",
                                        key=key)
                # Another client breaks in: the lock now holds someone else's value.
                self.assertEqual(self.nx("unlock", "--force", key).returncode, 0)
                self.assertEqual(self.nx("lock", "-t", "60", key).returncode, 0)
                self.assertEqual(p.wait(timeout=20), 79)
                self.assertGone(escapee)


if __name__ == "__main__":
    unittest.main()
