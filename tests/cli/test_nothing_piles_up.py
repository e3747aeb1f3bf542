"""Nothing piles up: released locks and abandoned ones leave nothing behind that lasts,
on every backend that can show it (harness.backends), each by its own promise.

- Redis (TCP, unix socket, Cluster, Sentinel, each server of a quorum): every key
  nxlock writes expires; a released lock leaves only its counter (man page, KEYS
  BESIDE A LOCK).
- The embedded store: a released lock leaves no file at all (no counter per key);
  an abandoned one is removed by a later owning step in its stripe once it has
  expired, and a key without a token never is (docs/STORE-FORMAT.md, "Nothing piles
  up").
- etcd: the lock is a key under KEY/ attached to a lease; a release revokes the lease
  and the key goes with it, an abandoned lease expires and takes its key (man page,
  ETCD). The fencing token is a revision: there is no counter to leave."""
import base64
import json
import os
import signal
import stat
import subprocess
import time
import unittest

from harness import (BIN, COMMAND_TIMEOUT, NxlockTestCase, bucket_of, files_under,
                     kill_with_watchdog, side_key,
                     smoke, wait_for)
from faults import FileSafetyCase, key_in_stripe

ROUNDS = 100
# The store's own files, which every store has (docs/STORE-FORMAT.md, "Layout").
STORE_FILES = {"nxlock-store", "fence"}
# Short enough that the backends whose promise is a removal after expiry show it
# within seconds (an embedded lock of ttl 1 has expired 3 s after its last write),
# and on etcd, whose lease is the ttl itself, long enough for the test to see the
# abandoned lease alive first.
TTL = {"etcd": "3"}
# Bounds far above those expiries, far below "never".
EXPIRY_BOUND = 20


class NothingPilesUp(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def backends(self):
        # The Redis keys are the same over the unix socket: it is left to
        # NXLOCK_TEST_BACKENDS=all, as the hundreds of commands are this file's cost.
        return super().backends(offering="lock", by_default=("file", "redis"))

    def lock_json(self, backend, key, *options):
        r = self.nx(*backend.args(), "--json", "lock", *options, key)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    # --- what each backend keeps ---

    def redis_keys(self, backend):
        """For each of the backend's Redis servers, its keys."""
        return [set(cli("--scan").decode().split()) for cli in backend.servers]

    def majority(self, backend):
        """On how many of its servers a backend keeps a key: a majority of a quorum's,
        one elsewhere (a Cluster keeps each key on the master that owns its slot)."""
        return len(backend.servers) // 2 + 1 if backend.name == "quorum" else 1

    def assertKeptOn(self, backend, kept, name):
        """`name` is kept where the backend keeps a key (see majority())."""
        on = sum(1 for keys in kept if name in keys)
        self.assertGreaterEqual(on, self.majority(backend), "%s on %d servers" % (name, on))

    def assertAllExpire(self, backend, kept):
        for cli, keys in zip(backend.servers, kept):
            for key in keys:
                ttl = int(cli("PTTL", key).decode().strip())
                self.assertGreater(ttl, 0, key)

    def etcd_keys(self, backend):
        """Every key in etcd, and the lease each is attached to (0 for none)."""
        out = backend.deployment.ctl("get", "", "--from-key", "-w", "json").stdout
        return {base64.b64decode(kv["key"]).decode(): kv.get("lease", 0)
                for kv in json.loads(out).get("kvs", [])}

    def etcd_leases(self, backend):
        """The ids of the leases etcd keeps."""
        out = backend.deployment.ctl("lease", "list", "-w", "json").stdout
        return {lease["ID"] for lease in json.loads(out).get("leases") or []}

    def etcd_ttl(self, backend, lease):
        """A lease's remaining TTL in seconds (-1: gone)."""
        out = backend.deployment.ctl("lease", "timetolive", "%x" % lease, "-w", "json").stdout
        return json.loads(out)["ttl"]

    def store_files(self):
        return files_under(self.store_path)

    def bucket_file(self, key):
        stripe, name = bucket_of(key)
        return os.path.join("data", stripe, name)

    # --- the tests ---

    def test_released_locks_leave_only_counters_and_those_expire(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                leases_before = self.etcd_leases(backend) if backend.name == "etcd" else set()
                for i in range(ROUNDS):
                    got = self.lock_json(backend, "lock-%d" % i, "-n")
                    r = self.nx(*backend.args(), "unlock", "lock-%d" % i, got["value"])
                    self.assertEqual(r.returncode, 0, r.stderr)
                for i in range(ROUNDS):
                    r = self.nx(*backend.args(), "run-locked", "-n", "run-%d" % i, "true")
                    self.assertEqual(r.returncode, 0, r.stderr)
                if backend.name == "file":
                    # No counter per key, and a bucket goes with its last entry.
                    self.assertEqual(self.store_files(), STORE_FILES)
                elif backend.name == "etcd":
                    # Each release revoked its lease, and the key went with it.
                    self.assertEqual(self.etcd_keys(backend), {})
                    self.assertEqual(self.etcd_leases(backend) - leases_before, set())
                else:
                    kept = self.redis_keys(backend)
                    expected = {side_key("lock-%d" % i, "fence") for i in range(ROUNDS)}
                    expected |= {side_key("run-%d" % i, "fence") for i in range(ROUNDS)}
                    # A quorum's run-locked lets go on every server that holds its
                    # lock, those that took it after the majority did too.
                    for keys in kept:
                        self.assertLessEqual(keys, expected)
                    for name in expected:
                        self.assertKeptOn(backend, kept, name)
                    self.assertAllExpire(backend, kept)

    @smoke
    def test_an_abandoned_lock_leaves_only_keys_that_expire(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                self.abandon(backend)
                if backend.name == "file":
                    self.check_swept(backend)
                elif backend.name == "etcd":
                    self.check_leases_expire(backend)
                else:
                    self.check_keys_expire(backend)

    def abandon(self, backend):
        """A lock taken and never released ("abandoned"), and a run-locked holder
        SIGKILLed while its job ran ("killed")."""
        u = backend.args()
        ttl = TTL.get(backend.name, "1")
        self.lock_json(backend, "abandoned", "-t", ttl)
        job = self.popen(*u, "run-locked", "-t", ttl, "killed", "sleep", "30")
        self.addCleanup(lambda: job.poll() is None and (job.kill(), job.wait()))

        # The holder record follows the lock: killed before it, there is none to see.
        def described():
            r = self.nx(*u, "--json", "status", "killed")
            return r.returncode == 0 and "command" in json.loads(r.stdout).get("holder", {})

        self.assertTrue(self.wait_bounded(described), "the holder never described itself")
        # nxlock and its watchdog together: the job dies with the watchdog, and the
        # lock is abandoned (nxlock alone would have it released by its watchdog).
        kill_with_watchdog(job.pid)
        job.wait(timeout=COMMAND_TIMEOUT)

    def wait_bounded(self, predicate, interval=0.1):
        return wait_for(predicate, EXPIRY_BOUND, interval)

    def check_keys_expire(self, backend):
        kept = self.redis_keys(backend)
        for key in ("abandoned", "killed"):
            for name in (key, side_key(key, "holder"), side_key(key, "fence")):
                self.assertKeptOn(backend, kept, name)
        self.assertAllExpire(backend, kept)
        # The lock key itself lives past the lock's ttl (no clock mode sees it go
        # early), and not forever; its value is still the page's bare timestamp.
        for cli, keys in zip(backend.servers, kept):
            if "abandoned" in keys:
                self.assertGreater(int(cli("PTTL", "abandoned").decode()), 5000)
                self.assertTrue(cli("GET", "abandoned").decode().strip().isdigit())

    def check_swept(self, backend):
        u = backend.args()
        locks = ("abandoned", "{abandoned}:holder:abandoned", "killed", "{killed}:holder:killed")
        files = {self.bucket_file(key) for key in locks}
        self.assertLessEqual(files, self.store_files())
        # A key of the page's clients (no token) beside the abandoned lock, expired
        # as long: the sweep leaves it alone.
        page_key = key_in_stripe(bucket_of("abandoned")[0], "page")
        r = self.nx(*u, "setnx", page_key, str(int(time.time()) - 60))
        self.assertEqual(r.returncode, 0, r.stderr)
        left = STORE_FILES | {self.bucket_file(page_key)}
        stripes = {bucket_of(key)[0] for key in locks}
        takers = [key_in_stripe(stripe, "taker") for stripe in sorted(stripes)]

        def swept():
            # A later owning step in each stripe sweeps it (then releases its own lock).
            for taker in takers:
                got = self.lock_json(backend, taker, "-n", "-t", "30")
                r = self.nx(*u, "unlock", taker, got["value"])
                self.assertEqual(r.returncode, 0, r.stderr)
            return self.store_files() == left

        self.assertTrue(self.wait_bounded(swept, 0.25),
                        "left in the store: %s" % sorted(self.store_files() - left))
        self.assertEqual(self.nx(*u, "get", page_key).returncode, 0)

    def check_leases_expire(self, backend):
        kept = self.etcd_keys(backend)
        for key in ("abandoned", "killed"):
            under = [name for name in kept if name.startswith(key + "/")]
            self.assertEqual(len(under), 1, kept)
        leases = set(kept.values())
        self.assertNotIn(0, leases, "a key with no lease: %s" % kept)
        for lease in leases:
            self.assertGreater(self.etcd_ttl(backend, lease), 0, "%x" % lease)
        self.assertTrue(self.wait_bounded(lambda: not self.etcd_keys(backend), 0.5),
                        "left in etcd: %s" % self.etcd_keys(backend))
        self.assertEqual(leases & self.etcd_leases(backend), set())


class OnTheEmbeddedStore(FileSafetyCase):
    """Released locks leave nothing; abandoned ones and dead waiters go; what is left
    takes the store's bits (docs/STORE-FORMAT.md). Its own: a lock taken under a clock
    two hours behind, the waiters' FIFOs, the store's permission bits."""

    def test_released_locks_leave_a_bounded_number_of_files(self):
        got = self.lock_json("-n", "first")
        self.assertEqual(self.nx("unlock", "first", got["value"]).returncode, 0)
        before = files_under(self.store_path)
        for i in range(100):
            got = self.lock_json("-n", "lock-%d" % i)
            r = self.nx("unlock", "lock-%d" % i, got["value"])
            self.assertEqual(r.returncode, 0, r.stderr)
        for i in range(100):
            r = self.nx("run-locked", "-n", "run-%d" % i, "true")
            self.assertEqual(r.returncode, 0, r.stderr)
        after = files_under(self.store_path)
        self.assertLessEqual(len(after - before), 2, sorted(after - before))

    def test_an_abandoned_expired_lock_goes_after_a_later_command(self):
        before = files_under(self.store_path)
        # A `lock` taken two hours ago that nobody released...
        r = self.faked("-2h", "lock", "-t", "1", "crashed-lock")
        self.assertEqual(r.returncode, 0, r.stderr)
        # ...and a run-locked killed with its job (its holder details stay too).
        p = self.start_run_locked("crashed-run", "-t", "1")
        kill_with_watchdog(p.pid)  # both: nxlock's watchdog alone would release it
        p.communicate(timeout=COMMAND_TIMEOUT)
        left = files_under(self.store_path) - before
        buckets = sorted(f for f in left if f.startswith("data/"))
        self.assertGreaterEqual(len(buckets), 3, left)
        # Until it expired (1 s, and the second it ends in).
        self.assertTrue(wait_for(lambda: self.nx("status", "crashed-run").returncode == 1,
                                 timeout=10))
        time.sleep(1.1)  # a bound: a second more, and its keys have expired
        # Later commands on other keys of the same stripes clean up as they go.
        for bucket in buckets:
            stripe = bucket.split("/")[1]
            key = key_in_stripe(stripe, "later")
            got = self.lock_json("-n", key)
            self.assertEqual(self.nx("unlock", key, got["value"]).returncode, 0)
        left = files_under(self.store_path) - before
        self.assertEqual(sorted(f for f in left if f.startswith("data/")), [])
        self.assertEqual(self.nx("get", "crashed-lock").returncode, 1)

    def test_a_killed_waiters_fifo_goes(self):
        got = self.lock_json("-n", "-t", "60", "busy")
        waiter = self.popen("lock", "-w", "30", "busy",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(self.stop, waiter)
        wait_dir = os.path.join(self.store_path, "wait")
        self.assertTrue(wait_for(lambda: os.path.isdir(wait_dir) and os.listdir(wait_dir),
                                 timeout=10), "the waiter made no FIFO")
        os.kill(waiter.pid, signal.SIGKILL)
        waiter.communicate(timeout=COMMAND_TIMEOUT)
        time.sleep(1.5)  # a bound: its place in line lapses
        r = self.nx("unlock", "busy", got["value"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(wait_dir), [])
        # Nor does the line stay behind.
        self.assertEqual(files_under(os.path.join(self.store_path, "data")), set())

    def test_files_follow_a_group_shared_stores_bits(self):
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o2770)
        env = dict(self.env, NXLOCK_STORE=os.path.join(shared, "store"))
        umask = os.umask(0o077)  # a user's private umask must not lock the group out
        try:
            holder = subprocess.run([BIN, "lock", "-t", "60", "g"], capture_output=True, env=env,
                                    timeout=COMMAND_TIMEOUT)
            self.assertEqual(holder.returncode, 0, holder.stderr)
            store = os.path.join(shared, "store")
            # An explicit path is made as mkdir(1) makes it...
            os.chmod(store, 0o2770)  # ...and a group that shares it sets its bits once
            waiter = subprocess.Popen([BIN, "lock", "-w", "20", "g"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.addCleanup(self.stop, waiter)
            wait_dir = os.path.join(store, "wait")
            self.assertTrue(wait_for(lambda: os.path.isdir(wait_dir) and os.listdir(wait_dir),
                                     timeout=10))
            fifo = os.path.join(wait_dir, os.listdir(wait_dir)[0])
            self.assertEqual(stat.S_IMODE(os.stat(fifo).st_mode), 0o660)
            r = subprocess.run([BIN, "unlock", "g", holder.stdout.decode().strip()], env=env,
                               capture_output=True, timeout=COMMAND_TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            waiter.communicate(timeout=COMMAND_TIMEOUT)
            self.assertEqual(waiter.returncode, 0)
        finally:
            os.umask(umask)
        for name in files_under(os.path.join(store, "data")):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(store, "data", name)).st_mode),
                             0o660, name)


if __name__ == "__main__":
    unittest.main()
