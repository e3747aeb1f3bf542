"""The waiters' queue: waiters take a lock in arrival order, a waiter killed while
queued does not stall the others past its lease, and a waiter that gives up (-w,
SIGINT) leaves the queue at once; on every backend that keeps such a queue
(harness.backends).

Every waiter is confirmed queued (its entry seen in the queue) before the next
one starts, so the order under test is the order the test made, whatever the
load: no assertion rests on timing except generous upper bounds."""
import os
import signal
import subprocess
import time
import unittest

from harness import BIN, NxlockTestCase, dying_with_parent, smoke, wait_for

KEY = "job"
QUEUE = "{job}:queue:job"
# A dead waiter's lease is 1 s and the others look at least every 0.4 s; a
# bound far above that, far below "never" (the lock would otherwise wait for the
# waiters' own -w 60).
STALL_BOUND = 20


class WaitersQueue(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()


    def hold(self, backend):
        r = self.nx(*backend.args(), "lock", "-t", "60", KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        # Released even when the test fails, so the next subtest finds KEY free.
        self.addCleanup(self.nx, *backend.args(), "unlock", KEY, value)
        return value

    def start_waiter(self, backend, name, *options, clock=None):
        """A queued `run-locked` that appends `name` to the grants file when it gets the lock;
        with `clock` ('-2h'), its wall clock is that far off (libfaketime)."""
        grants = os.path.join(self.tmp, "grants")
        before = self.queued(backend, QUEUE)
        args = [*backend.args(), "run-locked", "-t", "60", *options, KEY, "sh", "-c",
                'echo "$0" >> "$1"', name, grants]
        if clock is None:
            p = self.popen(*args, stderr=subprocess.PIPE)
        else:
            # Under AddressSanitizer libfaketime is preloaded ahead of its runtime.
            asan = ":".join(filter(None, [self.env.get("ASAN_OPTIONS"),
                                          "verify_asan_link_order=0"]))
            env = dict(self.env, FAKETIME_DONT_FAKE_MONOTONIC="1", ASAN_OPTIONS=asan)
            p = subprocess.Popen(dying_with_parent(["faketime", "-f", clock, BIN, *args]),
                                 env=env, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        wait_for(lambda: self.queued(backend, QUEUE) > before or p.poll() is not None, 20)
        self.assertIsNone(p.poll(), "waiter %s ended before it queued" % name)
        return p

    def grants(self):
        path = os.path.join(self.tmp, "grants")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().split()

    def release(self, backend, value):
        r = self.nx(*backend.args(), "unlock", KEY, value)
        self.assertEqual(r.returncode, 0, r.stderr)

    @smoke
    def test_arrival_order_is_kept(self):
        for backend in self.backends(offering="queue"):
            with self.subTest(backend=backend.name):
                self.setUp_grants()
                value = self.hold(backend)
                names = ["w%d" % i for i in range(6)]
                waiters = [self.start_waiter(backend, n, "-w", "60") for n in names]
                self.release(backend, value)
                for w in waiters:
                    _, err = w.communicate(timeout=60)
                    self.assertEqual(w.returncode, 0, err)
                self.assertEqual(self.grants(), names)
                self.assertEqual(self.queued(backend, QUEUE), 0)

    def test_a_killed_first_waiter_does_not_stall_the_others(self):
        for backend in self.backends(offering="queue"):
            with self.subTest(backend=backend.name):
                self.setUp_grants()
                value = self.hold(backend)
                first = self.start_waiter(backend, "first", "-w", "60")
                rest = [self.start_waiter(backend, n, "-w", "60") for n in ("second", "third")]
                first.send_signal(signal.SIGKILL)
                first.wait()
                self.release(backend, value)
                started = time.monotonic()
                for w in rest:
                    _, err = w.communicate(timeout=60)
                    self.assertEqual(w.returncode, 0, err)
                self.assertLess(time.monotonic() - started, STALL_BOUND)
                self.assertEqual(self.grants(), ["second", "third"])

    def test_a_waiter_whose_clock_is_behind_keeps_its_place(self):
        # A waiter's lease must be read on a clock that every process of the host
        # shares: on its own wall clock, two hours behind, it renewed its lease
        # into the others' past, and lost its place at each of their looks.
        for backend in self.backends(offering="queue"):
            with self.subTest(backend=backend.name):
                self.setUp_grants()
                value = self.hold(backend)
                behind = self.start_waiter(backend, "behind", "-w", "60", clock="-2h")
                time.sleep(1.5)  # a bound: past a lease, one on the wall clock would have lapsed
                other = self.start_waiter(backend, "other", "-w", "60")
                self.release(backend, value)
                for w in (behind, other):
                    _, err = w.communicate(timeout=60)
                    self.assertEqual(w.returncode, 0, err)
                self.assertEqual(self.grants(), ["behind", "other"])

    def test_a_waiter_that_gives_up_leaves_the_queue(self):
        for backend in self.backends(offering="queue"):
            for how in ("wait", "sigint", "sigterm"):
                with self.subTest(backend=backend.name, how=how):
                    self.setUp_grants()
                    value = self.hold(backend)
                    # Long enough that both waiters are seen queued before the
                    # quitter's wait runs out, however slow the machine.
                    options = ("-w", "8") if how == "wait" else ("-w", "60")
                    quitter = self.start_waiter(backend, "quitter", *options)
                    stayer = self.start_waiter(backend, "stayer", "-w", "60")
                    if how == "sigint":
                        quitter.send_signal(signal.SIGINT)
                    elif how == "sigterm":
                        quitter.send_signal(signal.SIGTERM)
                    _, err = quitter.communicate(timeout=30)
                    if how == "wait":
                        self.assertEqual(quitter.returncode, 75, err)
                    else:
                        self.assertNotEqual(quitter.returncode, 0, err)
                    # Gone as it exits, not when its lease lapses a second later.
                    self.assertEqual(self.queued(backend, QUEUE), 1)
                    self.release(backend, value)
                    _, err = stayer.communicate(timeout=STALL_BOUND)
                    self.assertEqual(stayer.returncode, 0, err)
                    self.assertEqual(self.grants(), ["stayer"])

    def test_a_client_that_knows_no_queue_still_takes_a_free_lock(self):
        # The page's own steps, as any other client does them: SETNX on the
        # lock key with a timestamp, and DEL.
        for backend in self.backends(offering=("queue", "kv")):
            with self.subTest(backend=backend.name):
                self.setUp_grants()
                r = self.nx(*backend.args(), "setnx", KEY, str(int(time.time()) + 60))
                self.assertEqual(r.returncode, 0, r.stderr)
                waiter = self.start_waiter(backend, "queued", "-w", "60")
                r = self.nx(*backend.args(), "del", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                _, err = waiter.communicate(timeout=STALL_BOUND)
                self.assertEqual(waiter.returncode, 0, err)
                self.assertEqual(self.grants(), ["queued"])

    def test_a_user_who_may_not_keep_the_queue_still_locks_and_waits(self):
        # An ACL that allows the lock's own commands and EVAL, but not the sorted
        # sets of the queue: locking and waiting work as without a queue.
        self.redis.cli("ACL", "SETUSER", "noqueue", "on", ">pw", "~*", "&*", "+@all", "-zadd")
        self.addCleanup(self.redis.cli, "ACL", "DELUSER", "noqueue")
        u = ["-u", "redis://noqueue:pw@127.0.0.1:%d" % self.redis.port]
        r = self.nx(*u, "lock", "-w", "5", "-t", "60", KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        waiter = self.popen(*u, "lock", "-w", "60", "-t", "60", KEY, stderr=subprocess.PIPE)
        r = self.nx(*u, "unlock", KEY, value)
        self.assertEqual(r.returncode, 0, r.stderr)
        _, err = waiter.communicate(timeout=STALL_BOUND)
        self.assertEqual(waiter.returncode, 0, err)

    # The queue's lease companion on Redis: each ticket scored by the server
    # instant (microseconds) its lease lapses.
    LEASES = "{job}:lease:{job}:queue:job"

    def lease_left(self, ticket, db="1"):
        """Seconds left of `ticket`'s lease in the queue on Redis db `db`, by the server's clock
        (read after the lease: a renewal in between cannot make it look longer)."""
        score = self.redis.cli("-n", db, "ZSCORE", self.LEASES, ticket).strip()
        secs, micros = self.redis.cli("-n", db, "TIME").split()
        return (float(score) - (int(secs) * 1e6 + int(micros))) / 1e6

    def test_a_waiter_far_back_renews_its_place_seldom(self):
        # Its lease covers a wait that grows with the waiters ahead of it (each
        # must take and release the lock first): the server's work per handoff
        # stays flat as the line grows. The first few keep a short lease.
        backend = self.backend_named("redis")
        self.setUp_grants()
        value = self.hold(backend)
        names = ["w%d" % i for i in range(20)]
        waiters = [self.start_waiter(backend, n, "-w", "60") for n in names]
        tickets = self.redis.cli("-n", "1", "ZRANGE", QUEUE, "0", "-1").split()
        self.assertEqual(len(tickets), len(names))
        # Each renews at its second step, once it knows its place.
        self.assertTrue(wait_for(lambda: max(self.lease_left(t) for t in tickets[12:]) > 1.1, 20))
        self.assertLessEqual(max(self.lease_left(t) for t in tickets[:8]), 1.0)
        self.release(backend, value)
        for w in waiters:
            _, err = w.communicate(timeout=60)
            self.assertEqual(w.returncode, 0, err)
        self.assertEqual(self.grants(), names)

    def test_a_waiter_handed_its_turn_keeps_its_place_one_turn_at_most(self):
        # A waiter far back keeps a long lease; once the release hands it its
        # turn, that lease is cut to a second: a dead one holds the line up no
        # longer than that, however far back it renewed last.
        backend = self.backend_named("redis")
        self.setUp_grants()
        value = self.hold(backend)
        dead = self.start_waiter(backend, "dead", "-w", "60")
        (ticket,) = self.redis.cli("-n", "1", "ZRANGE", QUEUE, "0", "-1").split()
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        # As a waiter far back leaves its lease: half a minute from now.
        secs, _ = self.redis.cli("-n", "1", "TIME").split()
        self.redis.cli("-n", "1", "ZADD", self.LEASES, "XX", str((int(secs) + 30) * 10**6), ticket)
        self.assertGreater(self.lease_left(ticket), 20)
        live = self.start_waiter(backend, "live", "-w", "60")
        started = time.monotonic()
        self.release(backend, value)
        self.assertLessEqual(self.lease_left(ticket), 1.0)
        _, err = live.communicate(timeout=60)
        self.assertEqual(live.returncode, 0, err)
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(self.grants(), ["live"])

    def setUp_grants(self):
        path = os.path.join(self.tmp, "grants")
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
