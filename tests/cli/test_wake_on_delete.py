"""A store's own deletions wake its waiters (there is no separate notify step):
unlock, unlock --force and del each wake a waiting `lock -w` on every backend,
over Redis by a message in the same round trip as the delete. That message is best
effort: a client that may not PUBLISH still releases."""
import select
import subprocess
import time
import unittest

from harness import COMMAND_TIMEOUT, NxlockTestCase, Subscriber

class DeletionsWakeWaiters(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def waiting(self, u):
        """A -v `lock -w` on "job" once it waits, and the trace it printed so far.

        It looks twice before it waits: once, then again after arming its watch
        (on Redis, after subscribing), so the second GET in its trace says it waits.
        """
        waiter = self.popen(*u, "-v", "lock", "-w", "60", "-t", "60", "job",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(waiter.kill)
        trace = b""
        deadline = time.monotonic() + 10
        while trace.count(b"nxlock: GET job ") < 2 and time.monotonic() < deadline:
            if select.select([waiter.stderr], [], [], 0.5)[0]:
                trace += waiter.stderr.readline()
        self.assertEqual(trace.count(b"nxlock: GET job "), 2, trace)
        self.assertIsNone(waiter.poll())
        return waiter, trace

    def release_wakes(self, u, release):
        value = self.nx(*u, "lock", "-t", "60", "job").stdout.decode().strip()
        on_redis = u[1].startswith(("redis", "unix"))
        if on_redis:
            subscriber = Subscriber(self.redis.port, "nxlock:wake:job")
            self.addCleanup(subscriber.close)
        waiter, err = self.waiting(u)
        r = release(value)
        self.assertEqual(r.returncode, 0, r.stderr)
        out, rest = waiter.communicate(timeout=COMMAND_TIMEOUT + 10)
        err += rest
        self.assertEqual(waiter.returncode, 0, err)
        if on_redis:
            # The delete sent its own message. Whether the waiter read it or a
            # poll tick that raced it came first is not for this test to decide.
            self.assertTrue(subscriber.wait_for(b"message"), "no wake-up message")
        self.assertEqual(self.nx(*u, "unlock", "job", out.decode().strip()).returncode, 0)

    def test_unlock_wakes_a_waiter(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.release_wakes(u, lambda value: self.nx(*u, "unlock", "job", value))

    def test_forced_unlock_wakes_a_waiter(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.release_wakes(u, lambda value: self.nx(*u, "unlock", "--force", "job"))

    def test_del_wakes_a_waiter(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.release_wakes(u, lambda value: self.nx(*u, "del", "other", "job"))


class WakeUpIsBestEffort(NxlockTestCase):
    """A user whose ACL forbids PUBLISH still releases (exit 0); the wake-up is
    best effort, and the holder details go with the lock."""

    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def setUp(self):
        super().setUp()
        self.redis.cli("ACL", "SETUSER", "nopub", "reset", "on", ">nopub-pw", "~*", "&*",
                       "+@all", "-publish")
        self.addCleanup(self.redis.cli, "ACL", "DELUSER", "nopub")
        self.url = "redis://nopub:nopub-pw@127.0.0.1:%d" % self.redis.port

    def test_unlock_without_publish_permission(self):
        taken = self.nx("-u", self.url, "lock", "k")
        self.assertEqual(taken.returncode, 0, taken.stderr)
        self.assertNotEqual(self.redis.cli("EXISTS", "{k}:holder:k").strip(), b"0")
        released = self.nx("-u", self.url, "unlock", "k", taken.stdout.strip())
        self.assertEqual(released.returncode, 0, released.stderr)
        self.assertEqual(self.redis.cli("EXISTS", "k", "{k}:holder:k").strip(), b"0")

    def test_forced_unlock_without_publish_permission(self):
        self.assertEqual(self.nx("-u", self.url, "lock", "k").returncode, 0)
        forced = self.nx("-u", self.url, "unlock", "--force", "k")
        self.assertEqual(forced.returncode, 0, forced.stderr)
        self.assertEqual(self.redis.cli("EXISTS", "k").strip(), b"0")

    def test_run_locked_without_publish_permission(self):
        r = self.nx("-u", self.url, "run-locked", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"not released", r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", "k", "{k}:holder:k").strip(), b"0")


if __name__ == "__main__":
    unittest.main()
