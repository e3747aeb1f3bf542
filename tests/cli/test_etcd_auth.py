"""etcd with auth on: credentials that work through any member, and what doctor says of them.

A command authenticates once per run, on the first member that answers; a
member that is down is left for the next, token and all (man page, ETCD, "Auth").
`doctor` checks what a lock needs of the user: a transaction on the keys under
--prefix and a lease.
"""
import unittest

from etcd_harness import HAVE_ETCD, EtcdCluster
from harness import NxlockTestCase, wait_for

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

    def test_doctor_agrees_with_the_commands(self):
        r = self.nx("-u", self.url, "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^warn member 127\.0\.0\.1:%d " % self.etcd.members[0].client_port)
        self.assertRegex(out, r"(?m)^ok   auth on, user root may take locks on every key")


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdAuthPermissions(NxlockTestCase):
    """One member, auth on: `reader` may only read under locks/, `locker` read and write there."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(1)
        cls.addClassCleanup(cls.etcd.stop)
        for user, role, permission in (("reader", "ro", "read"), ("locker", "rw", "readwrite")):
            cls.etcd.ctl("user", "add", "%s:%spw" % (user, user))
            cls.etcd.ctl("role", "add", role)
            cls.etcd.ctl("role", "grant-permission", role, permission, "--prefix", "locks/")
            cls.etcd.ctl("user", "grant-role", user, role)
        cls.etcd.enable_auth("rootpw")

    def url(self, user):
        return self.etcd.url().replace("etcd://", "etcd://%s:%spw@" % (user, user))

    def test_a_user_that_may_not_write_fails_doctor_as_it_fails_a_lock(self):
        url = self.url("reader")
        r = self.nx("-u", url, "--prefix", "locks/", "run-locked", "-n", "k", "true")
        self.assertOneLineError(r, 77, "permission denied")
        r = self.nx("-u", url, "--prefix", "locks/", "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 77, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^FAIL auth on, user reader is accepted but may not take locks on "
                         r"the keys under 'locks/': etcdserver: permission denied \u2014 grant its "
                         r"role that: etcdctl role grant-permission ROLE readwrite --prefix locks/$")

    def test_a_user_that_may_lock_under_the_prefix_passes(self):
        url = self.url("locker")
        r = self.nx("-u", url, "--prefix", "locks/", "run-locked", "-n", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("-u", url, "--prefix", "locks/", "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^ok   auth on, user locker may take locks on the keys under "
                         r"'locks/' \(a transaction there, a lease\)$")
        # Without --prefix, every key: it may not, but its locks may all be under one.
        r = self.nx("-u", url, "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^warn auth on, user locker is accepted but may not take locks "
                         r"on every key: .* \u2014 give --prefix to check")
        self.assertEqual(self.etcd.keys("locks/"), [])  # doctor wrote nothing there

    def test_no_credentials_fail_doctor_as_they_fail_a_lock(self):
        r = self.nx("-u", self.etcd.url(), "run-locked", "-n", "k", "true")
        self.assertOneLineError(r, 77, "user name is empty")
        r = self.nx("-u", self.etcd.url(), "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 77, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^FAIL auth on, and no credentials were given: a lock's "
                         r"requests are refused \u2014 give USER:PASSWORD@ in the URL, or "
                         r"--password-file$")


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdDoctorQuorumLost(NxlockTestCase):
    """Three members without auth, two of them stopped: the auth probe cannot say."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(3)
        cls.addClassCleanup(cls.etcd.stop)
        for member in cls.etcd.members[1:]:
            member.kill()
        # The last one's election timeout passes: it then knows no leader.
        left = cls.etcd.members[0]
        if not wait_for(lambda: (left.status() or {}).get("leader", "0") == "0"):
            raise AssertionError("etcd: the last member still names a leader")

    def test_an_auth_probe_that_failed_says_so(self):
        r = self.nx("--io-timeout", "1", "-u", self.etcd.url(), "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 1, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^FAIL leader none")
        self.assertRegex(out, r"(?m)^skip auth not checked: ")
        self.assertNotRegex(out, r"(?m)^ok   auth")


if __name__ == "__main__":
    unittest.main()
