"""The etcd:// backend against real etcd: one member, and a cluster of three.

The lock is etcd's own recipe (concurrency.Mutex), so `etcdctl lock` and nxlock
exclude each other and queue together; a holder whose lease or key goes stops
its job (79); a waiter that gives up takes its key away with its lease.
"""
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

from etcd_harness import ETCDCTL, HAVE_ETCD, EtcdCluster, OneMemberTestCase
from harness import (COMMAND_TIMEOUT, NxlockTestCase, RedisServer, dying_with_parent, read,
                     wait_for)
from deployments import Certificates


# A job that logs "in NAME" and "out NAME" around a pause.
LOGGED = 'echo "in $0" >> "$1"; sleep %s; echo "out $0" >> "$1"'


def sections(log):
    """[(name, "in"|"out")...] from a LOGGED log."""
    return [tuple(reversed(line.split())) for line in read(log).splitlines()]


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdSingleTest(OneMemberTestCase):
    def setUp(self):
        super().setUp()
        self.url = self.etcd.url()

    def ctl_lock(self, key, log, name, pause):
        return subprocess.Popen(
            dying_with_parent([ETCDCTL, "--endpoints", self.etcd.endpoints(), "lock", key, "--",
                               "sh", "-c", LOGGED % pause, name, log]),
            env=dict(self.env, ETCDCTL_API="3"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    def nx_lock(self, key, log, name, pause, *options):
        return self.popen("run-locked", *options, key, "sh", "-c", LOGGED % pause, name, log,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def test_key_value_exact_to_the_byte(self):
        value = b"\xff\x01 two words \xe2\x82\xac\n"
        self.assertEqual(self.nx("setnx", "kv", value).returncode, 0)
        self.assertEqual(self.nx("setnx", "kv", b"other").returncode, 1)
        self.assertEqual(self.nx("get", "kv").stdout, value + b"\n")
        r = self.nx("getset", "kv", b"second")
        self.assertEqual(r.stdout, value + b"\n")
        self.assertEqual(self.nx("get", "kv").stdout, b"second\n")
        self.assertEqual(self.nx("del", "kv").returncode, 0)
        self.assertEqual(self.nx("get", "kv").returncode, 1)

    def test_lock_status_renew_unlock(self):
        r = self.nx("lock", "-t", "7", "cmd")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        self.assertRegex(value, r"^\d+@[0-9a-f]+$")
        lease = value.split("@")[1]
        self.assertEqual(self.etcd.keys("cmd/"), ["cmd/" + lease])
        status = self.nx("status", "cmd").stdout.decode()
        self.assertIn("lease granted for 7s", status)
        self.assertIn("@" + lease, status)
        r = self.nx("renew", "-t", "9", "cmd", value)
        self.assertOneLineError(r, 64, "lease's TTL is 7 s")
        self.assertEqual(self.nx("renew", "-t", "7", "cmd", value).returncode, 0)
        self.assertOneLineError(self.nx("lock", "-n", "cmd"), 75, "busy")
        self.assertEqual(self.etcd.keys("cmd/"), ["cmd/" + lease])  # the busy one revoked its own
        self.assertEqual(self.nx("unlock", "cmd", value).returncode, 0)
        self.assertEqual(self.nx("status", "cmd").returncode, 1)
        self.assertEqual(self.nx("unlock", "cmd", value).returncode, 1)

    def test_fence_is_the_create_revision_and_rises(self):
        fences = []
        for _ in range(2):
            r = self.nx("run-locked", "fence", "sh", "-c", 'echo "$NXLOCK_FENCE"')
            self.assertEqual(r.returncode, 0, r.stderr)
            fences.append(int(r.stdout))
        self.assertLess(fences[0], fences[1])
        r = self.nx("run-locked", "fence", "sh", "-c", "etcdctl --endpoints %s get fence/ --prefix "
                    "-w fields | grep CreateRevision; echo $NXLOCK_FENCE" % self.etcd.endpoints(),
                    env=dict(self.env, ETCDCTL_API="3"))
        numbers = re.findall(rb"\d+", r.stdout)
        self.assertEqual(numbers[0], numbers[-1], r.stdout)

    def test_interop_with_etcdctl_both_ways_in_arrival_order(self):
        log = os.path.join(self.tmp, "log")
        first = self.ctl_lock("mx", log, "A", "2.5")
        self.assertTrue(wait_for(lambda: sections(log) == [("A", "in")]))
        procs = [first, self.nx_lock("mx", log, "B", "0.5")]
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("mx/")) == 2))
        procs.append(self.ctl_lock("mx", log, "C", "0.5"))
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("mx/")) == 3))
        procs.append(self.nx_lock("mx", log, "D", "0.1"))
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("mx/")) == 4))
        for p in procs:
            self.assertEqual(p.wait(timeout=30), 0)
        expected = [(n, e) for n in "ABCD" for e in ("in", "out")]
        self.assertEqual(sections(log), expected)  # no overlap, arrival order kept
        self.assertEqual(self.etcd.keys("mx/"), [])

    def test_waiter_that_gives_up_revokes_its_lease(self):
        holder = self.nx("lock", "-t", "20", "gu")
        held = holder.stdout.decode().strip()
        self.assertOneLineError(self.nx("lock", "-w", "0.3", "gu"), 75, "busy")
        self.assertEqual(len(self.etcd.keys("gu/")), 1)
        waiter = self.popen("lock", "gu", stderr=subprocess.DEVNULL)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("gu/")) == 2))
        waiter.send_signal(signal.SIGTERM)
        self.assertEqual(waiter.wait(timeout=10), 128 + signal.SIGTERM)
        self.assertEqual(len(self.etcd.keys("gu/")), 1)
        self.assertEqual(self.nx("unlock", "gu", held).returncode, 0)

    def test_unlock_with_another_locks_value_leaves_that_lock_alone(self):
        # A value names a lease; revoking it would free every key on it, another lock's too.
        other = self.nx("lock", "-n", "-t", "60", "ul-b").stdout.decode().strip()
        r = self.nx("--json", "unlock", "ul-a", other)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(self.nx("status", "ul-b").returncode, 0)
        self.assertEqual(len(self.etcd.keys("ul-b/")), 1)
        # Nor a lease whose key `unlock --force` deleted: nothing is released then.
        self.assertEqual(self.nx("unlock", "--force", "ul-b").returncode, 0)
        r = self.nx("--json", "unlock", "ul-b", other)
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_renew_with_another_locks_value_does_not_keep_that_lease_alive(self):
        other = self.nx("lock", "-n", "-t", "10", "rn-b").stdout.decode().strip()
        lease = self.etcd.keys("rn-b/")[0].split("/")[1]
        time.sleep(3)  # a bound: long enough for the lease's TTL to fall visibly
        r = self.nx("--json", "renew", "-t", "10", "rn-a", other)
        self.assertEqual(r.returncode, 1, r.stderr)
        left = self.etcd.ctl("lease", "timetolive", lease).stdout
        # Granted 10 s, 3 s ago: a keepalive would have made it 10 again.
        self.assertLessEqual(int(re.search(r"remaining\((-?[0-9]+)s\)", left).group(1)), 8, left)

    def test_holder_key_deleted_stops_the_job(self):
        log = os.path.join(self.tmp, "log")
        job = self.nx_lock("dk", log, "J", "30", "-t", "30", "--kill-after", "1")
        self.assertTrue(wait_for(lambda: sections(log) == [("J", "in")]))
        began = time.monotonic()
        self.etcd.ctl("del", "--prefix", "dk/")
        self.assertEqual(job.wait(timeout=20), 79)
        self.assertLess(time.monotonic() - began, 5)

    def test_lease_revoked_stops_the_job(self):
        log = os.path.join(self.tmp, "log")
        job = self.nx_lock("rv", log, "J", "30", "-t", "3", "--kill-after", "1")
        self.assertTrue(wait_for(lambda: sections(log) == [("J", "in")]))
        lease = self.etcd.keys("rv/")[0].split("/")[1]
        self.etcd.ctl("lease", "revoke", lease)
        self.assertEqual(job.wait(timeout=20), 79)

    def test_shared_slots_and_several_urls_refused(self):
        self.assertOneLineError(self.nx("lock", "--shared", "x"), 64, "--shared")
        self.assertOneLineError(self.nx("lock", "--slots", "2", "x"), 64, "--slots")
        self.assertOneLineError(self.nx("-u", self.url, "-u", self.url, "lock", "x"), 64,
                                "already a quorum")
        self.assertOneLineError(self.nx("-u", self.url, "-u", "redis://127.0.0.1:1", "lock", "x"),
                                64, "already a quorum")

    def test_list_and_doctor(self):
        self.nx("lock", "-t", "20", "ls/a")
        r = self.nx("--json", "list", "ls/*")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b'"key":"ls/a"', r.stdout)
        r = self.nx("doctor")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn(b"leader", r.stdout)
        self.assertIn(b"auth off", r.stdout)

    def test_bad_input(self):
        self.assertOneLineError(self.nx("-u", "etcd://host:99999", "get", "k"), 64, "bad port")
        self.assertOneLineError(self.nx("-u", "etcd://h/path", "get", "k"), 64, "no path")
        dead = "127.0.0.1:%d" % free_tcp_port()
        # A dead member in the list: the live one answers.
        mixed = "etcd://%s,127.0.0.1:%d" % (dead, self.etcd.members[0].client_port)
        self.assertEqual(self.nx("-u", mixed, "run-locked", "-n", "bd", "true").returncode, 0)
        self.assertOneLineError(self.nx("-u", "etcd://" + dead, "get", "k"), 69, "refused")
        # A Redis server where etcd was expected: it closes on an HTTP request.
        redis = RedisServer()
        try:
            url = "etcd://127.0.0.1:%d" % redis.port
            self.assertOneLineError(self.nx("-u", url, "get", "k"), 69, "closed the connection")
        finally:
            redis.stop()
        server = http.server.HTTPServer(("127.0.0.1", 0), QuietHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = "etcd://127.0.0.1:%d" % server.server_address[1]
            self.assertOneLineError(self.nx("-u", url, "lock", "k"), 69, "not an etcd v3 gateway")
        finally:
            server.shutdown()
            server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Any web server: it answers POST with 501, and logs nothing."""

    def log_message(self, *args):
        pass


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdClusterTest(NxlockTestCase):
    """A fresh cluster of three per test: each one breaks it."""

    def setUp(self):
        super().setUp()
        self.etcd = EtcdCluster(3)
        self.addCleanup(self.etcd.stop)
        self.env["NXLOCK_URL"] = self.etcd.url()

    def test_leader_killed_while_a_job_runs(self):
        log = os.path.join(self.tmp, "log")
        job = self.popen("run-locked", "-t", "4", "lk", "sh", "-c", LOGGED % "4", "J", log,
                         stderr=subprocess.PIPE)
        self.addCleanup(job.stderr.close)
        self.assertTrue(wait_for(lambda: sections(log) == [("J", "in")]))
        self.etcd.wait_leader().kill()
        # Nobody else takes it while the job runs.
        def ended_or_taken():
            if job.poll() is not None:
                return True
            r = self.nx("run-locked", "-n", "lk", "true")
            if r.returncode == 0:
                # Only after the job's end: nxlock lets go before it exits (a loaded
                # host shows the gap).
                self.assertIn(("J", "out"), sections(log))
                return True
            self.assertIn(r.returncode, (75, 69), r.stderr)
            return False
        wait_for(ended_or_taken, COMMAND_TIMEOUT, interval=0.3)
        self.assertEqual(job.wait(), 0, job.stderr.read())
        self.assertEqual(sections(log), [("J", "in"), ("J", "out")])

    def test_quorum_lost_stops_the_job_before_the_lease_could_expire(self):
        log = os.path.join(self.tmp, "log")
        job = self.popen("--io-timeout", "0.5", "run-locked", "-t", "4", "--kill-after", "0.5", "ql",
                         "sh", "-c", LOGGED % "30", "J", log, stderr=subprocess.PIPE)
        self.addCleanup(job.stderr.close)
        self.assertTrue(wait_for(lambda: sections(log) == [("J", "in")]))
        stopped = time.monotonic()
        for member in self.etcd.members[:2]:
            member.kill()
        err = job.stderr.read().decode()
        self.assertEqual(job.wait(timeout=20), 79, err)
        # The last try, cut at the lock's deadline, was no wait "after 0s".
        self.assertNotIn("after 0s", err)
        # Stopped within the lease's 4 s from the last keepalive, itself before `stopped`.
        self.assertLess(time.monotonic() - stopped, 4.0)
        self.assertEqual(sections(log), [("J", "in")])


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdSecuredTest(NxlockTestCase):
    """etcds:// (TLS) and etcd's auth, on a member of their own."""

    @classmethod
    def setUpClass(cls):
        cls.certs = Certificates()
        cls.etcd = EtcdCluster(1, tls=(cls.certs.path("server.crt"), cls.certs.path("server.key"),
                                       cls.certs.path("ca.crt")))
        cls.addClassCleanup(cls.etcd.stop)
        cls.addClassCleanup(shutil.rmtree, cls.certs.dir, True)
        cls.etcd.ctl("user", "add", "root:rootpw")
        cls.etcd.ctl("user", "grant-role", "root", "root")
        cls.etcd.ctl("auth", "enable")

    def setUp(self):
        super().setUp()
        self.host = "127.0.0.1:%d" % self.etcd.members[0].client_port
        self.ca = ("--cacert", self.certs.path("ca.crt"))

    def test_tls_and_credentials(self):
        url = "etcds://root:rootpw@" + self.host
        r = self.nx("-u", url, *self.ca, "run-locked", "-n", "sec", "sh", "-c", "echo $NXLOCK_FENCE")
        self.assertEqual(r.returncode, 0, r.stderr)
        password = os.path.join(self.tmp, "password")
        with open(password, "w") as f:
            f.write("rootpw\n")
        r = self.nx("-u", "etcds://" + self.host, *self.ca, "--password-file", password,
                    "setnx", "sec-kv", "v")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_wrong_credentials_are_77(self):
        r = self.nx("-u", "etcds://root:wrong@" + self.host, *self.ca, "get", "k")
        self.assertOneLineError(r, 77, "authentication failed", "***")
        self.assertNotIn(b"wrong", r.stderr)
        r = self.nx("-u", "etcds://" + self.host, *self.ca, "get", "k")
        self.assertOneLineError(r, 77, "user name is empty")

    def test_tls_name_mismatch_and_unknown_ca_are_77(self):
        url = "etcds://root:rootpw@" + self.host
        r = self.nx("-u", url, *self.ca, "--sni", "other.example", "get", "k")
        self.assertOneLineError(r, 77, "mismatch")
        r = self.nx("-u", url, "--cacert", self.certs.path("other-ca.crt"), "get", "k")
        self.assertOneLineError(r, 77, "verification failed")


if __name__ == "__main__":
    unittest.main()
