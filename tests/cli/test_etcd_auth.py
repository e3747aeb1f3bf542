"""etcd with auth on: credentials that work through any member, and what doctor says of them.

A command authenticates once per run, on the first member that answers; a
member that is down is left for the next, token and all (man page, ETCD, "Auth").
`doctor` checks what a lock needs of the user: a transaction on the keys under
--prefix and a lease.
"""
import os
import unittest

from etcd_harness import ETCD, ETCDCTL, EtcdCluster
from harness import NxlockTestCase

HAVE_ETCD = os.path.exists(ETCD) and os.path.exists(ETCDCTL)


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdAuthFirstMemberDown(NxlockTestCase):
    """Three members, auth on, the first one in the URL stopped."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(3)
        cls.addClassCleanup(cls.etcd.stop)
        cls.etcd.enable_auth("rootpw")
        cls.etcd.members[0].kill()
        cls.etcd.wait_leader()

    def setUp(self):
        super().setUp()
        self.url = self.etcd.url().replace("etcd://", "etcd://root:rootpw@")

    def test_commands_authenticate_on_the_next_member(self):
        r = self.nx("-u", self.url, "run-locked", "-n", "down-first", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("-u", self.url, "setnx", "down-first-kv", "v")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("-u", self.url, "lock", "-n", "-t", "5", "down-first-lock")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        self.assertEqual(self.nx("-u", self.url, "status", "down-first-lock").returncode, 0)
        self.assertEqual(self.nx("-u", self.url, "unlock", "down-first-lock", value).returncode, 0)


if __name__ == "__main__":
    unittest.main()
