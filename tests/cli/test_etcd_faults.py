"""etcd:// under a member's faults, on a cluster of three: a holder whose key is deleted
while its watch's member is frozen still stops its job within a renewal (docs/DESIGN.md,
guarantee 3), and a waiter waits out a killed leader or a frozen member until its wait's
end, keeping its place in line (man page, ETCD, Waiting). The namespace variant of the
first, where only the link from the holder to one member is cut, is in
test_etcd_partition.py.
"""
import os
import signal
import subprocess
import sys
import time
import unittest

from etcd_harness import HAVE_ETCD, JOB, EtcdCluster, events
from harness import NxlockTestCase, read, wait_for


# A job that runs until the file named by its first argument exists.
UNTIL = 'while [ ! -e "$0" ]; do sleep 0.05; done'


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
        self.assertIn("TERM", events(log), read(err))
        self.assertLess(events(log)["TERM"][0] - deleted, ttl / 3 + 2.0, read(err))

    def test_watch_moves_to_the_member_that_answers_the_renewals(self):
        leader = self.etcd.wait_leader()
        watched = next(m for m in self.etcd.members if m is not leader)
        others = [m for m in self.etcd.members if m is not watched]
        log = os.path.join(self.tmp, "job.log")
        ttl = 9
        holder, err = self.spawn("holder.err", "-u", self.etcd.url([watched] + others),
                                 "run-locked", "-t", str(ttl), "--kill-after", "1", "mw",
                                 sys.executable, "-c", JOB, log, "60")
        self.assertTrue(wait_for(lambda: "START" in events(log), timeout=20), read(err))
        self.assertTrue(wait_for(lambda: watched.watchers() == 1), "no watch on the follower")
        [key] = self.etcd.keys("mw/")

        self.freeze(watched)
        # The next renewal fails over to another member, and the watch follows it.
        self.assertTrue(wait_for(lambda: sum(m.watchers() or 0 for m in others) == 1,
                                 timeout=ttl / 3 + 5), read(err))
        deleted = time.monotonic()
        self.etcd.ctl("del", key, members=others)
        self.assertEqual(holder.wait(timeout=ttl / 3 + 10), 79, read(err))
        # Seen on the watch, not at the next renewal (ttl/3 = 3 s after the last).
        self.assertIn("TERM", events(log), read(err))
        self.assertLess(events(log)["TERM"][0] - deleted, 1.5, read(err))

    def test_waiter_outlasts_a_killed_leader_in_its_place(self):
        leader = self.etcd.wait_leader()
        rest = [m for m in self.etcd.members if m is not leader]
        flag = os.path.join(self.tmp, "flag")
        log = os.path.join(self.tmp, "waiter.log")
        holder, holder_err = self.spawn("holder.err", "-u", self.etcd.url(rest), "run-locked",
                                        "-t", "6", "lk", "sh", "-c", UNTIL, flag)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("lk/")) == 1), read(holder_err))
        # The leader first: the waiter's watch and calls go to it. A short --io-timeout,
        # so that the election (500 ms here) outlasts whole calls, as etcd's default
        # election (1 s) outlasts the default --io-timeout's share of each member.
        waiter, waiter_err = self.spawn(
            "waiter.err", "-u", self.etcd.url([leader] + rest), "--io-timeout", "0.3",
            "run-locked", "-w", "30", "lk", "sh", "-c", 'echo taken >> "$0"', log)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("lk/")) == 2), read(waiter_err))
        line = self.etcd.keys("lk/")

        leader.kill()
        killed = time.monotonic()
        self.etcd.wait_leader()
        # Waited out: the wait has 30 s, and the cluster answers again.
        self.assertFalse(wait_for(lambda: waiter.poll() is not None, timeout=4),
                         "the waiter gave up %.1f s after the leader's kill:\n%s"
                         % (time.monotonic() - killed, read(waiter_err)))
        # In its place: the same key (its lease survives a leader's loss).
        self.assertEqual(self.etcd.keys("lk/"), line)
        open(flag, "w").close()
        self.assertEqual(holder.wait(timeout=20), 0, read(holder_err))
        self.assertEqual(waiter.wait(timeout=20), 0, read(waiter_err))
        self.assertEqual(read(log), "taken\n")

    def test_waiter_without_a_wait_limit_outlasts_a_frozen_member(self):
        leader = self.etcd.wait_leader()
        frozen = next(m for m in self.etcd.members if m is not leader)
        rest = [m for m in self.etcd.members if m is not frozen]
        flag = os.path.join(self.tmp, "flag")
        log = os.path.join(self.tmp, "waiter.log")
        holder, holder_err = self.spawn("holder.err", "-u", self.etcd.url(rest), "run-locked",
                                        "-t", "30", "st", "sh", "-c", UNTIL, flag)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("st/")) == 1), read(holder_err))
        # The waiter knows the member that freezes alone: its keepalives (every second,
        # -t 3) fail for 8 s, and its lease lapses meanwhile.
        waiter, waiter_err = self.spawn("waiter.err", "-u", self.etcd.url([frozen]),
                                        "run-locked", "-t", "3", "st", "sh", "-c",
                                        'echo taken >> "$0"', log)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("st/")) == 2), read(waiter_err))
        [holder_key, waiter_key] = self.etcd.keys("st/")

        self.freeze(frozen)
        began = time.monotonic()
        self.assertFalse(wait_for(lambda: waiter.poll() is not None, timeout=8),
                         "the waiter gave up %.1f s into the freeze:\n%s"
                         % (time.monotonic() - began, read(waiter_err)))
        self.assertEqual(self.etcd.keys("st/", members=rest), [holder_key])  # its lease lapsed
        frozen.kill(signal.SIGCONT)
        # Back in line, behind the holder, under a new lease.
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("st/")) == 2, timeout=15),
                        read(waiter_err))
        self.assertEqual(self.etcd.keys("st/")[0], holder_key)
        self.assertNotEqual(self.etcd.keys("st/")[1], waiter_key)
        self.assertIsNone(waiter.poll(), read(waiter_err))
        open(flag, "w").close()
        self.assertEqual(holder.wait(timeout=20), 0, read(holder_err))
        self.assertEqual(waiter.wait(timeout=20), 0, read(waiter_err))
        self.assertEqual(read(log), "taken\n")


if __name__ == "__main__":
    unittest.main()
