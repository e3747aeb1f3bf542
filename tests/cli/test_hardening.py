"""Hardening (issue 12): faults, hostile input and signals, each fenced by a test."""
import os
import signal
import subprocess
import time
import unittest

from harness import BIN, NxlockTestCase, die_with_parent


def wait_for(predicate, timeout=10.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def proc_stat(pid):
    """(comm, state, ppid) of a process, or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return comm, fields[0], int(fields[1])


def alive(pid, argv0=None):
    """True if `pid` runs (a zombie is dead), and is still the `argv0` we started."""
    stat = proc_stat(pid)
    if stat is None or stat[1] == "Z":
        return False
    if argv0 is not None:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().split(b"\0")[0].endswith(argv0.encode())
        except FileNotFoundError:
            return False
    return True


def descendants(root):
    """Every process descended from `root`, from one walk of /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None:
                children.setdefault(stat[2], []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class JobDiesWithNxlock(NxlockTestCase):
    """Finding 1: no part of the job outlives nxlock, however nxlock is SIGKILLed."""

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
        self.assertTrue(all(alive(pid, "sleep") for pid in pids))
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


if __name__ == "__main__":
    unittest.main()
