"""etcd:// under a member's faults, on a cluster of three: a holder whose key is deleted
while its watch's member is frozen still stops its job within a renewal (docs/DESIGN.md,
guarantee 3). The namespace variant, where only the link from the holder to one member
is cut, is in test_etcd_partition.py.
"""
import os
import signal
import subprocess
import sys
import time
import unittest

from etcd_harness import ETCD, ETCDCTL, EtcdCluster
from harness import NxlockTestCase, read, wait_for
from test_etcd_partition import JOB, events

HAVE_ETCD = os.path.exists(ETCD) and os.path.exists(ETCDCTL)

@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdFaultsTest(NxlockTestCase):
    """A fresh cluster of three per test: each one freezes or kills a member."""

    def setUp(self):
        super().setUp()
        self.etcd = EtcdCluster(3)
        self.addCleanup(self.etcd.stop)

    def freeze(self, member):
        member.kill(signal.SIGSTOP)
        self.addCleanup(member.kill, signal.SIGCONT)  # before the cluster's stop

    def spawn(self, err_name, *args):
        """nxlock with `args`, its stderr in the temp dir (read(path) for messages)."""
        path = os.path.join(self.tmp, err_name)
        with open(path, "wb") as err:
            process = self.popen(*args, stdout=subprocess.DEVNULL, stderr=err)
        self.addCleanup(lambda: process.poll() is None and (process.kill(), process.wait()))
        return process, path

    def test_key_deleted_while_the_watch_member_is_frozen_stops_the_job(self):
        leader = self.etcd.wait_leader()
        watched = next(m for m in self.etcd.members if m is not leader)
        others = [m for m in self.etcd.members if m is not watched]
        log = os.path.join(self.tmp, "job.log")
        ttl = 6
        # The follower first in the URL: the holder's calls and its watch go to it.
        holder, err = self.spawn("holder.err", "-u", self.etcd.url([watched] + others),
                                 "run-locked", "-t", str(ttl), "--kill-after", "1", "bd",
                                 sys.executable, "-c", JOB, log, "60")
        self.assertTrue(wait_for(lambda: "START" in events(log), timeout=20), read(err))
        self.assertTrue(wait_for(lambda: watched.watchers() == 1), "no watch on the follower")
        [key] = self.etcd.keys("bd/")

        self.freeze(watched)
        deleted = time.monotonic()
        self.etcd.ctl("del", key, members=others)
        # Its keepalives go through another member and succeed: only a look at the key
        # itself, at the next renewal, can tell the job to stop.
        try:
            status = holder.wait(timeout=ttl / 3 + 12)
        except subprocess.TimeoutExpired:
            self.fail("the job ran on %.1f s after its key was deleted:\n%s"
                      % (time.monotonic() - deleted, read(err)))
        self.assertEqual(status, 79, read(err))
        # Within a renewal's interval (ttl/3), the frozen member's share of --io-timeout
        # (2 s over three members) and a loaded host's slack.
        self.assertLess(events(log)["TERM"][0] - deleted, ttl / 3 + 2.0, read(err))


if __name__ == "__main__":
    unittest.main()
