"""SENTINEL FAILOVER under a running run-locked: the job keeps its lock, the holder follows the new master, a demoted master confirms nothing.

Three Sentinels (quorum 2), a master and two replicas, with the harness's
timings: down after 1 s, failover-timeout 3 s, parallel-syncs 1, replicas that
re-sync without the 5 s diskless delay. The old master of a SENTINEL FAILOVER
stays up, and stays a master that takes writes until the Sentinels demote it
(about 8 s later): a connection to it does not break by itself.
"""
import os
import re
import signal
import time
import unittest

import harness
from harness import NxlockTestCase
from sentinel_harness import MASTER_NAME, Deployment, cli, wait_for


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


class FailoverTestCase(NxlockTestCase):
    def deploy(self):
        deployment = Deployment(replicas=2, sentinels=3)
        self.addCleanup(deployment.stop)
        return deployment

    def start_job(self, url, *args, ttl, seconds):
        """run-locked -v --ttl `ttl` on key `job` for a `seconds` job, `args` before
        the command; its trace goes to a file."""
        err_path = os.path.join(self.tmp, "job-%d.err" % time.monotonic_ns())
        with open(err_path, "wb") as err:
            job = self.popen("-u", url, *args, "-v", "run-locked", "--ttl", str(ttl), "job",
                             "sleep", str(seconds), stderr=err)
        self.addCleanup(lambda: job.poll() is None and (job.kill(), job.wait()))
        wait_for(lambda: re.search(r"SETNX job \d+ → 1", read_text(err_path)), 10, "the lock")
        return job, err_path

    def fail_over(self, deployment):
        """SENTINEL FAILOVER through the last Sentinel (nxlock asks the first one
        first: it hears of the new master only from the others). Returns the new
        master's port once every Sentinel names it."""
        old = deployment.master.port
        self.assertEqual(deployment.sentinels[-1].cli("SENTINEL", "FAILOVER", MASTER_NAME).strip(),
                         "OK")
        wait_for(lambda: all(s.master_port() not in (None, old) for s in deployment.sentinels),
                 20, "every Sentinel to name the new master")
        return deployment.sentinels[0].master_port()


class TestFailoverKeepsTheJob(FailoverTestCase):
    """With --replicas 1 and a replica left, the failover costs nothing.

    A renewal sent just after the Sentinels promoted a replica is confirmed on
    the old master by the other replica, which then re-syncs from the new
    master and drops it: the new master holds the value before it, with our
    token. run-locked's renewal keeps that previous value among those it may
    find, or the holder would read it as taken over.
    """

    def test_run_locked_with_replicas_runs_through_failovers(self):
        for round_number in range(2):
            d = self.deploy()
            job, err_path = self.start_job(d.url(), "--replicas", "1", ttl=3, seconds=9)
            time.sleep(0.5)  # a bound: half a second into the job
            new_port = self.fail_over(d)
            job.wait(timeout=30)
            err = read_text(err_path)
            self.assertEqual(job.returncode, 0, "round %d: %s" % (round_number, err))
            self.assertIn("connected to master '%s' at 127.0.0.1:%d" % (MASTER_NAME, new_port),
                          err)
            # Released on the new master.
            self.assertEqual(cli(new_port, "EXISTS", "job").strip(), "0", err)
            d.stop()


class TestHolderFollowsTheNewMaster(FailoverTestCase):
    """The old master keeps taking writes after the failover; the
    holder asks the Sentinels as it renews and leaves it within one interval."""

    def test_renewals_move_to_the_new_master_within_an_interval(self):
        d = self.deploy()
        old_port = d.master.port
        ttl = 6  # renewals every 2 s, the Sentinels demote the old master after about 8 s
        job, err_path = self.start_job(d.url(), ttl=ttl, seconds=12)
        new_port = self.fail_over(d)
        moved = "connected to master '%s' at 127.0.0.1:%d" % (MASTER_NAME, new_port)
        # One renewal interval, plus a second for the renewal itself and the poll.
        followed = harness.wait_for(lambda: moved in read_text(err_path), ttl / 3 + 1)
        err = read_text(err_path)
        self.assertTrue(followed, "the holder did not follow within one renewal interval: "
                        + err)
        self.assertIn("role:master", cli(old_port, "INFO", "replication"),
                      "the old master was demoted already: the test proves nothing")
        job.wait(timeout=30)
        err = read_text(err_path)
        # Without --replicas the lock there is what replication carried over:
        # still ours (0), or a renewal that never reached it (79, "taken over").
        self.assertIn(job.returncode, (0, 79), err)
        # Never back to the old master.
        self.assertNotIn("at 127.0.0.1:%d" % old_port, err[err.index(moved):])


class TestDemotedMasterConfirmsNothing(FailoverTestCase):
    """With --replicas 1, a holder still on the old master (here it
    reaches it by a plain redis:// URL, as one whose Sentinels are unreachable
    would) never has a renewal confirmed there once the replicas followed the
    new master."""

    def test_renewals_on_the_old_master_are_never_confirmed(self):
        d = self.deploy()
        old_port = d.master.port
        old_url = "redis://127.0.0.1:%d" % old_port
        r = self.nx("-u", old_url, "--replicas", "1", "lock", "-n", "--ttl", "30", "L")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        job, err_path = self.start_job(old_url, "--replicas", "1", "--io-timeout", "0.5", ttl=3,
                                       seconds=30)
        new_port = self.fail_over(d)
        # Both replicas replicate from the new master (one is it): none is left
        # to acknowledge the old one.
        wait_for(lambda: all("master_port:%d" % new_port in cli(r.port, "INFO", "replication")
                             for r in d.replicas if r.port != new_port), 20,
                 "the replica to follow the new master")
        wait_for(lambda: "connected_slaves:0" in cli(old_port, "INFO", "replication"), 20,
                 "the old master to lose its replicas")
        moved_at = len(read_text(err_path))
        r = self.nx("-u", old_url, "--replicas", "1", "--io-timeout", "0.5", "renew", "L", value)
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn(b"0 of 1 replicas", r.stderr)
        r = self.nx("-u", old_url, "--replicas", "1", "--io-timeout", "0.5", "lock", "-n", "M")
        self.assertEqual(r.returncode, 69, r.stderr)
        # The running holder: no renewal confirmed after that point, and it
        # stops its job (79) before its lock could expire on the new master.
        job.wait(timeout=30)
        err = read_text(err_path)
        self.assertEqual(job.returncode, 79, err)
        after = err[moved_at:]
        self.assertNotRegex(after, r"SET-IF-EQUAL job \S+ \S+( if \S+ = \d+)? → 1\n", err)
        self.assertIn("no renewal was confirmed", after)


class TestHungSentinel(FailoverTestCase):
    """Asking the Sentinels as it renews must not cost the lock when the one
    asked first hangs (SIGSTOP): the ask gets half the time left at most."""

    def test_a_stopped_sentinel_costs_no_renewal(self):
        d = Deployment(replicas=1, sentinels=2)
        self.addCleanup(d.stop)
        job, err_path = self.start_job(d.url(), ttl=3, seconds=5)
        first = d.sentinels[0].process
        first.send_signal(signal.SIGSTOP)
        try:
            time.sleep(4)  # the fault lasts 4 s: past a renewal
        finally:
            first.send_signal(signal.SIGCONT)
        job.wait(timeout=30)
        self.assertEqual(job.returncode, 0, read_text(err_path))


if __name__ == "__main__":
    unittest.main()
