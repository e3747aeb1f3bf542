"""etcd: what nxlock says and touches at the edges (man page, ETCD).

A lock's own keys are KEY/<lease in hex>; a key with `/` (a/b) has its keys
under its prefix's (a/), and etcd's prefix rule makes a taker of `a` wait for
`a/b`'s holder, but `status a` and `unlock --force a` look only at a's own.
"""
import json
import os
import re
import socket
import struct
import subprocess
import threading
import time
import unittest

from etcd_harness import ETCDCTL, HAVE_ETCD, EtcdCluster, OneMemberTestCase
from harness import NxlockTestCase, dying_with_parent, free_port, wait_for

@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdOwnKeys(OneMemberTestCase):

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

    def test_list_waiters_names_each_waiter(self):
        held = self.nx("lock", "-t", "30", "lw").stdout.decode().strip()
        waiter = self.popen("lock", "lw", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(waiter.wait, 10)
        self.addCleanup(waiter.terminate)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("lw/")) == 2))
        ctl = subprocess.Popen(dying_with_parent(
            [ETCDCTL, "--endpoints", self.etcd.endpoints(), "lock", "lw", "true"]),
            env=dict(self.env, ETCDCTL_API="3"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(ctl.wait, 10)
        self.addCleanup(ctl.kill)
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("lw/")) == 3))
        r = self.nx("list", "--waiters", "lw")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertRegex(lines[2], r"^  waiter 1: pid %d on \S+, exclusive, waiting since .* "
                         r"\(\d+s\)$" % waiter.pid)
        self.assertEqual(lines[3], "  waiter 2: a waiter that told nothing of itself (etcdctl "
                         "lock, or an older nxlock)")
        self.assertEqual(len(lines), 4, lines)
        lock = json.loads(self.nx("--json", "list", "--waiters", "lw").stdout)["locks"][0]
        self.assertEqual(lock["waiters"], 2)
        self.assertEqual([w["pid"] for w in lock["waiting"]], [waiter.pid, None])
        self.assertEqual(lock["waiting"][0]["kind"], "exclusive")
        self.assertEqual(self.nx("unlock", "lw", held).returncode, 0)



class Listener:
    """A loopback port that accepts and then says nothing (`reset`: resets each
    connection once it has read the request); stopped by close()."""

    def __init__(self, reset):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.reset, self.held, self.stopped = reset, [], False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            if self.reset:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                except OSError:
                    pass
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            else:
                self.held.append(conn)

    def close(self):
        self.stopped = True
        self.thread.join()
        for conn in self.held:
            conn.close()
        self.sock.close()


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdLimits(OneMemberTestCase):

    def test_a_key_too_large_for_the_request_limit_is_a_usage_error(self):
        # One argument is at most 128 KiB: the prefix and the key make 262 KB.
        half = "k" * 131000
        r = self.nx("--prefix", half, "lock", "-n", half)
        self.assertOneLineError(r, 64, "the key is too large for etcd's request limit",
                                "--max-request-bytes")
        self.assertEqual(self.etcd.keys(half[:1000]), [])

    def test_a_long_command_is_recorded_shortened(self):
        ready = os.path.join(self.tmp, "ready")
        # 1.6 MB: more than etcd's 1.5 MiB request limit, within ARG_MAX.
        words = ["x" * 100000] * 16
        job = self.popen("run-locked", "-t", "30", "long", "sh", "-c",
                         'touch "$0"; while [ -e "$0" ]; do sleep 0.05; done', ready, *words,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(job.wait, 10)
        self.addCleanup(lambda: os.path.exists(ready) and os.unlink(ready))

        def holder():
            r = self.nx("--json", "list", "long")
            locks = json.loads(r.stdout)["locks"]
            return locks[0]["holder"] if locks else None
        self.assertTrue(wait_for(lambda: holder() is not None))
        recorded = holder()
        self.assertEqual(recorded["pid"], job.pid)
        self.assertTrue(recorded["command"].startswith("sh -c "), recorded["command"][:80])
        self.assertTrue(recorded["command"].endswith("\u2026"), recorded["command"][-80:])
        self.assertLessEqual(len(recorded["command"].encode()), 4096 + 3)

    def test_no_member_answered_says_what_each_did(self):
        silent, resetting = Listener(reset=False), Listener(reset=True)
        self.addCleanup(silent.close)
        self.addCleanup(resetting.close)
        refused = free_port()
        url = "etcd://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d" % (silent.port, refused,
                                                                 resetting.port)
        began = time.monotonic()
        r = self.nx("-u", url, "get", "k")
        took = time.monotonic() - began
        self.assertEqual(r.returncode, 69, r.stderr)
        said = r.stderr.decode()
        # Each member's share of the 2 s: the first timed out after 0.667 s, the
        # others failed at once; so the 2 s were not spent, and it says no such thing.
        self.assertLess(took, 1.9)
        self.assertRegex(said, r"no member answered \(127\.0\.0\.1:%d: no answer: timed out "
                         r"after 0\.66\d*s; 127\.0\.0\.1:%d: connection refused; "
                         r"127\.0\.0\.1:%d: connection reset by peer\)\n$"
                         % (silent.port, refused, resetting.port))
        self.assertNotIn("within", said)
        # All three silent: the 2 s are spent, and it says so.
        url = "etcd://127.0.0.1:%d,127.0.0.1:%d" % (silent.port, silent.port)
        r = self.nx("-u", url, "get", "k")
        self.assertRegex(r.stderr.decode(), r"no member answered within 2s \(")



@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdLeaseTtl(NxlockTestCase):
    """etcd's own raft timing: its least lease TTL is 2 s (1.5 election timeouts)."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(1, timing=(100, 1000))
        cls.addClassCleanup(cls.etcd.stop)

    def setUp(self):
        super().setUp()
        self.env["NXLOCK_URL"] = self.etcd.url()

    def test_renew_takes_the_ttl_as_asked_or_as_granted(self):
        value = self.nx("lock", "-n", "-t", "1", "tt").stdout.decode().strip()
        self.assertRegex(value, r"^\d+@[0-9a-f]+$")
        # Each renewal within the lease's 2 s of the last.
        r = self.nx("renew", "-t", "1", "tt", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        r = self.nx("renew", "-t", "2", "tt", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        self.assertIn("lease granted for 2s", self.nx("status", "tt").stdout.decode())
        r = self.nx("renew", "-t", "3", "tt", value)
        self.assertOneLineError(r, 64, "-t 3", "the lease's TTL is 2 s, etcd's least", "-t 2 or less")
        self.assertEqual(self.nx("unlock", "tt", value).returncode, 0)
        # Granted as asked: only that.
        value = self.nx("lock", "-n", "-t", "5", "tt").stdout.decode().strip()
        for ttl in ("1", "2", "9"):
            r = self.nx("renew", "-t", ttl, "tt", value)
            self.assertOneLineError(r, 64, "-t " + ttl, "the lease's TTL is 5 s", "use -t 5")
        self.assertEqual(self.nx("unlock", "tt", value).returncode, 0)


if __name__ == "__main__":
    unittest.main()
