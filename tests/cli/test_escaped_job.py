"""run-locked: a job part that leaves the job's process group (setsid, setpgid) still dies with the lock."""
import os
import signal
import subprocess
import unittest

from harness import BIN, NxlockTestCase, alive, die_with_parent, read, wait_for

# Each starts a long sleeper outside the job's process group, writes its pid, and waits.
ESCAPES = {
    "setsid": 'setsid sleep 301 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait',
    "setpgid": ('python3 -c "import os, time; os.setpgid(0, 0); time.sleep(302)" & '
                'echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait'),
}


class EscapedJobDiesWithTheLock(NxlockTestCase):

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
