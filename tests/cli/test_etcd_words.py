"""etcd: what nxlock says and touches at the edges (man page, ETCD).

A lock's own keys are KEY/<lease in hex>; a key with `/` (a/b) has its keys
under its prefix's (a/), and etcd's prefix rule makes a taker of `a` wait for
`a/b`'s holder, but `status a` and `unlock --force a` look only at a's own.
"""
import json
import os
import unittest

from etcd_harness import ETCD, ETCDCTL, EtcdCluster
from harness import NxlockTestCase

HAVE_ETCD = os.path.exists(ETCD) and os.path.exists(ETCDCTL)


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdOwnKeys(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(1)
        cls.addClassCleanup(cls.etcd.stop)

    def setUp(self):
        super().setUp()
        self.env["NXLOCK_URL"] = self.etcd.url()
        self.etcd.wipe()

    def test_force_and_status_leave_a_lock_under_the_key_alone(self):
        r = self.nx("lock", "-t", "30", "ok/b")
        self.assertEqual(r.returncode, 0, r.stderr)
        under = self.etcd.keys("ok/b/")
        self.assertEqual(len(under), 1)
        # etcd's prefix rule: a taker of ok waits for ok/b's holder (as etcdctl's does).
        self.assertOneLineError(self.nx("run-locked", "-n", "ok", "true"), 75, "busy")
        r = self.nx("status", "ok")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout.decode(), "free\nbut lock 'ok/b' under it is held, and a taker "
                         "of this one waits for it (etcd's prefix rule)\n")
        r = self.nx("--json", "status", "ok")
        self.assertEqual(json.loads(r.stdout)["held_under"], "ok/b")
        r = self.nx("unlock", "--force", "ok")
        self.assertOneLineError(r, 1, "no such lock", "lock 'ok/b' under it holds")
        self.assertEqual(self.etcd.keys("ok/b/"), under)
        self.assertEqual(self.nx("status", "ok/b").returncode, 0)

    def test_force_takes_the_locks_own_holder_only(self):
        held = self.nx("lock", "-n", "-t", "30", "own").stdout.decode().strip()
        self.assertEqual(self.nx("lock", "-n", "-t", "30", "own/b").returncode, 0)
        r = self.nx("status", "own")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("@" + held.split("@")[1], r.stdout.decode())
        self.assertEqual(self.nx("unlock", "--force", "own").returncode, 0)
        self.assertEqual(self.etcd.keys("own/"), self.etcd.keys("own/b/"))
        self.assertEqual(len(self.etcd.keys("own/b/")), 1)
        self.assertEqual(self.nx("status", "own/b").returncode, 0)


if __name__ == "__main__":
    unittest.main()
