"""An etcd:// holder cut off from etcd by a network partition: run-locked stops its job
(79) before the lease could lapse, and the next holder, with a line to etcd, gets a
higher fence token. A holder cut off from one member of three only, its key deleted
meanwhile, stops its job within a renewal. The holder runs in a network namespace made
here (the nemesis's veth pair and iptables DROP: tests/nemesis/netns.py); etcd serves
loopback and the pair's host side. Needs root, ip(8) and iptables(8).
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nemesis"))
import netns  # noqa: E402  (the nemesis's namespace and its cut)
import processes  # noqa: E402  (started in the namespace, with PR_SET_PDEATHSIG)

from etcd_harness import HAVE_ETCD, JOB, EtcdCluster, events  # noqa: E402
from harness import BIN, NxlockTestCase, read, wait_for  # noqa: E402


class NamespacedHolder(NxlockTestCase):
    """A holder in a namespace of its own, and etcd (`members` of them) on loopback and
    the namespace's veth pair."""
    members = 1

    def setUp(self):
        super().setUp()
        why = netns.available()
        if why:
            self.skipTest(why)
        netns.remove_stale()
        self.ns = netns.Namespace()
        self.addCleanup(self.ns.close)  # the namespace, its veth pair and its iptables rules
        self.etcd = EtcdCluster(self.members, hosts=(self.ns.host_address,))
        self.addCleanup(self.etcd.stop)

    def wait_log(self, log, word, timeout):
        return wait_for(lambda: word in events(log), timeout, interval=0.01)


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdPartitionTest(NamespacedHolder):
    def test_cut_off_holder_stops_before_the_ttl_and_the_next_fence_is_higher(self):
        cut_log = os.path.join(self.tmp, "cut.log")
        err_path = os.path.join(self.tmp, "holder.err")
        # -t 4 and a short --io-timeout: the lost keepalives are noticed within the lease.
        with open(err_path, "wb") as err:
            holder = processes.start(
                [BIN, "-u", self.etcd.url(host=self.ns.host_address), "--io-timeout", "0.5",
                 "run-locked", "-t", "4", "--kill-after", "1", "cut", sys.executable, "-c", JOB, cut_log, "30"],
                netns=self.ns.name, env=self.env, stderr=err)
        self.addCleanup(lambda: holder.poll() is None and (holder.kill(), holder.wait()))
        self.assertTrue(self.wait_log(cut_log, "START", 20), read(err_path))
        # Keepalives every ttl/3 have flowed for a while before the cut.
        time.sleep(1.5)  # a bound: long enough for several keepalives
        cut = time.monotonic()
        self.ns.cut()

        # The next holder, on loopback, queues at once and runs when the lease is gone.
        next_log = os.path.join(self.tmp, "next.log")
        taker = self.nx("run-locked", "-w", "20", "cut", sys.executable, "-c", JOB, next_log,
                        "0", env=dict(self.env, NXLOCK_URL=self.etcd.url()), timeout=30)
        self.assertEqual(taker.returncode, 0, taker.stderr)
        try:
            status = holder.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.fail("the cut-off holder never exited:\n" + read(err_path))
        self.assertEqual(status, 79, read(err_path))

        first, second = events(cut_log), events(next_log)
        self.assertIn("TERM", first, "the cut-off job got no SIGTERM:\n" + read(err_path))
        # Stopped within the lease's 4 s, counted from the last keepalive sent (before the cut).
        self.assertLess(first["TERM"][0] - cut, 4.0, read(err_path))
        # ... and before the next holder's job began.
        self.assertLess(first["TERM"][0], second["START"][0])
        self.assertGreater(second["START"][1], first["START"][1])


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdOneLinkCutTest(NamespacedHolder):
    members = 3

    def test_key_deleted_while_the_link_to_the_watch_member_is_cut_stops_the_job(self):
        leader = self.etcd.wait_leader()
        watched = next(m for m in self.etcd.members if m is not leader)
        others = [m for m in self.etcd.members if m is not watched]
        log = os.path.join(self.tmp, "job.log")
        err_path = os.path.join(self.tmp, "holder.err")
        ttl = 6
        # The follower first in the URL: the holder's calls and its watch go to it.
        url = self.etcd.url([watched] + others, host=self.ns.host_address)
        with open(err_path, "wb") as err:
            holder = processes.start(
                [BIN, "-u", url, "run-locked", "-t", str(ttl), "--kill-after", "1", "cl",
                 sys.executable, "-c", JOB, log, "60"],
                netns=self.ns.name, env=self.env, stderr=err)
        self.addCleanup(lambda: holder.poll() is None and (holder.kill(), holder.wait()))
        self.assertTrue(self.wait_log(log, "START", 20), read(err_path))
        self.assertTrue(wait_for(lambda: watched.watchers() == 1), "no watch on the follower")

        self.ns.cut_port(watched.client_port)
        cut = time.monotonic()
        r = self.nx("unlock", "--force", "cl", env=dict(self.env, NXLOCK_URL=self.etcd.url(others)))
        self.assertEqual(r.returncode, 0, r.stderr)
        # The keepalives go through another member and succeed; the watch is silent.
        try:
            status = holder.wait(timeout=ttl / 3 + 12)
        except subprocess.TimeoutExpired:
            self.fail("the job ran on %.1f s after its key was deleted:\n%s"
                      % (time.monotonic() - cut, read(err_path)))
        self.assertEqual(status, 79, read(err_path))
        # Within a renewal's interval (ttl/3), the cut member's share of --io-timeout and
        # a loaded host's slack.
        self.assertLess(events(log)["TERM"][0] - cut, ttl / 3 + 2.0, read(err_path))


if __name__ == "__main__":
    unittest.main()
