"""Redis Cluster: three masters made by redis-cli --cluster create; keys on every node, reached through any seed."""
import os
import signal
import subprocess
import time

from harness import COMMAND_TIMEOUT, REDIS_CLI, NxlockTestCase, Subscriber
from deployments import Cluster, WithCluster, key_slot
from sentinel_harness import cli, wait_for


class ClusterTestCase(WithCluster, NxlockTestCase):
    pass


class TestClusterKeys(ClusterTestCase):
    def test_keys_on_every_node_through_one_seed(self):
        url = self.cluster.url()
        for node in self.cluster.nodes:
            key = self.cluster.key_on(node)
            r = self.nx("-u", url, "setnx", key, "v-" + key)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(cli(node.port, "GET", key).strip(), "v-" + key)
            r = self.nx("-u", url, "get", key)
            self.assertEqual((r.returncode, r.stdout.decode()), (0, "v-%s\n" % key), r.stderr)
            r = self.nx("-u", url, "getset", key, "w")
            self.assertEqual(r.stdout.decode(), "v-%s\n" % key, r.stderr)
        keys = [self.cluster.key_on(n) for n in self.cluster.nodes]
        r = self.nx("-u", url, "del", *keys)
        self.assertEqual((r.returncode, r.stdout), (0, b"3\n"), r.stderr)

    def test_lock_commands_on_keys_of_other_nodes(self):
        seed = self.cluster.nodes[0]
        url = self.cluster.url(seed)
        for node in self.cluster.nodes[1:]:
            key = self.cluster.key_on(node, "lock")
            r = self.nx("-u", url, "lock", "--ttl", "30", key)
            self.assertEqual(r.returncode, 0, r.stderr)
            value = r.stdout.decode().strip()
            self.assertEqual(cli(node.port, "GET", key).strip(), value)
            r = self.nx("-u", url, "status", key)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.nx("-u", url, "lock", "-n", key)
            self.assertEqual(r.returncode, 75, r.stderr)
            r = self.nx("-u", url, "renew", "--ttl", "30", key, value)
            self.assertEqual(r.returncode, 0, r.stderr)
            value = r.stdout.decode().strip()
            r = self.nx("-u", url, "unlock", key, value)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(cli(node.port, "EXISTS", key).strip(), "0")
            marker = os.path.join(self.tmp, "ran-" + key)
            r = self.nx("-u", url, "run-locked", "-n", key, "touch", marker)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.exists(marker))
            self.assertEqual(cli(node.port, "EXISTS", key).strip(), "0")

    def test_a_dead_first_seed_the_next_one_answers(self):
        url = "redis://127.0.0.1:1," + self.cluster.url(self.cluster.nodes[1])[len("redis://"):]
        key = self.cluster.key_on(self.cluster.nodes[2])
        r = self.nx("-u", url, "setnx", key, "v")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(cli(self.cluster.nodes[2].port, "GET", key).strip(), "v")

    def test_an_ask_redirect_is_followed(self):
        # A slot half-way through a migration: the key is already on the target,
        # so the source answers ASK and the command goes there after ASKING.
        source, target = self.cluster.nodes[0], self.cluster.nodes[1]
        key = self.cluster.key_on(source, "ask")
        slot = str(key_slot(key))
        source_id = cli(source.port, "CLUSTER", "MYID").strip()
        target_id = cli(target.port, "CLUSTER", "MYID").strip()
        cli(target.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        cli(source.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        try:
            r = self.nx("-u", self.cluster.url(source), "-v", "setnx", key, "moved-along")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b"ASK " + slot.encode(), r.stderr)
            self.assertIn(key, cli(target.port, "CLUSTER", "GETKEYSINSLOT", slot, "10"))
            # The source does not have it: it sends the client on.
            self.assertTrue(cli(source.port, "EXISTS", key).startswith("ASK "))
            r = self.nx("-u", self.cluster.url(source), "get", key)
            self.assertEqual((r.returncode, r.stdout), (0, b"moved-along\n"), r.stderr)
        finally:
            self.nx("-u", self.cluster.url(source), "del", key)
            for n in (source, target):
                cli(n.port, "CLUSTER", "SETSLOT", slot, "STABLE")


class TestClusterContention(ClusterTestCase):
    def test_workers_through_different_seeds_never_overlap(self):
        log = os.path.join(self.tmp, "log")
        key = self.cluster.key_on(self.cluster.nodes[2], "contended")
        script = 'echo "in $$" >> "%s"; sleep 0.05; echo "out $$" >> "%s"' % (log, log)
        workers = []
        for i in range(6):
            seed = self.cluster.nodes[i % 3]
            loop = ("for j in 1 2 3 4; do %s -u %s run-locked -w 60 %s sh -c '%s' || exit 9; done"
                    % (os.path.abspath(self.nx_bin()), self.cluster.url(seed), key, script))
            workers.append(subprocess.Popen(["sh", "-c", loop], env=self.env,
                                            stderr=subprocess.PIPE))
        for w in workers:
            _, err = w.communicate(timeout=120)
            self.assertEqual(w.returncode, 0, err)
        with open(log) as f:
            lines = f.read().split()
        events = [lines[i] for i in range(0, len(lines), 2)]
        self.assertEqual(len(events), 6 * 4 * 2)
        depth = 0
        for event in events:
            depth += 1 if event == "in" else -1
            self.assertIn(depth, (0, 1), "overlapping critical sections")

    def test_a_waiter_is_woken_by_a_release(self):
        owner = self.cluster.nodes[1]
        key = self.cluster.key_on(owner, "wake")
        r = self.nx("-u", self.cluster.url(self.cluster.nodes[0]), "lock", "--ttl", "60", key)
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        # What the waiter's node carries: the cluster passes a PUBLISH to every node.
        listener = Subscriber(self.cluster.nodes[2].port, "nxlock:wake:" + key)
        self.addCleanup(listener.close)
        # The waiter subscribes through another node than the one that holds the key.
        waiter = self.popen("-u", self.cluster.url(self.cluster.nodes[2]), "-v", "lock", "-w", "30",
                            "--ttl", "60", key, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1)  # a bound: a waiter that did not wait would have exited by then
        self.assertIsNone(waiter.poll())
        released = time.monotonic()
        r = self.nx("-u", self.cluster.url(self.cluster.nodes[0]), "unlock", key, value)
        self.assertEqual(r.returncode, 0, r.stderr)
        out, err = waiter.communicate(timeout=30)
        woke = time.monotonic() - released
        self.assertEqual(waiter.returncode, 0, err)
        # The release's PUBLISH reached the waiter's node. Whether the waiter read
        # it (traced on its subscriber connection) or a poll tick (every
        # 100-300 ms) found the key gone first is a race this test leaves alone.
        self.assertTrue(listener.wait_for(b"message"), "the release sent no wake-up")
        self.assertLess(woke, 5)

    def nx_bin(self):
        from harness import BIN
        return BIN


class TestSlotMigration(ClusterTestCase):
    """A cluster of its own: the test moves a slot for good."""

    def start_migration(self, slot, source, target):
        """The Cluster specification's resharding steps up to the move of every key in the slot.

        The slot is then still the source's: it answers ASK for the keys it no longer has.
        """
        source_id = cli(source.port, "CLUSTER", "MYID").strip()
        target_id = cli(target.port, "CLUSTER", "MYID").strip()
        self.assertIn("OK", cli(target.port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING",
                                source_id))
        self.assertIn("OK", cli(source.port, "CLUSTER", "SETSLOT", str(slot), "MIGRATING",
                                target_id))
        # The lock and its companion keys (holder details, fencing counter) share the slot.
        keys = cli(source.port, "CLUSTER", "GETKEYSINSLOT", str(slot), "100").split()
        self.assertTrue(keys, "nothing to migrate")
        self.assertIn("OK", cli(source.port, "MIGRATE", "127.0.0.1", str(target.port), "", "0",
                                "5000", "KEYS", *keys))
        return keys

    def finish_migration(self, slot, source, target):
        """SETSLOT NODE on every master, the target first: from now on, MOVED."""
        target_id = cli(target.port, "CLUSTER", "MYID").strip()
        for node in [target, source] + [n for n in self.cluster.nodes if n not in (source, target)]:
            self.assertIn("OK", cli(node.port, "CLUSTER", "SETSLOT", str(slot), "NODE", target_id))

    def test_a_slot_migrated_during_run_locked(self):
        source, target = self.cluster.nodes[0], self.cluster.nodes[1]
        key = self.cluster.key_on(source, "migrating")
        slot = key_slot(key)
        url = self.cluster.url(source)  # the seed is the node the slot leaves
        err_path = os.path.join(self.tmp, "job.err")
        done_path = os.path.join(self.tmp, "done")
        with open(err_path, "wb") as err:
            # ttl 2: a renewal about every second, each with a new value. The job
            # runs until the test is done with it, however slow the machine.
            job = self.popen("-u", url, "-v", "run-locked", "-t", "2", key, "sh", "-c",
                             'while [ ! -e "$0" ]; do sleep 0.1; done', done_path, stderr=err)

        def value_on_target():
            # ASKING first, on the same connection: mid-migration the target
            # answers for the importing slot only after it.
            out = subprocess.run([REDIS_CLI, "-p", str(target.port)],
                                 input=("ASKING\nGET %s\n" % key).encode(),
                                 capture_output=True, timeout=COMMAND_TIMEOUT).stdout.decode()
            lines = out.splitlines()
            return lines[1].strip() if len(lines) == 2 and lines[0] == "OK" else ""

        def renewed_on_target(since):
            wait_for(lambda: value_on_target() not in ("", since), 10,
                     "a renewal on the new owner")
            return value_on_target()

        try:
            wait_for(lambda: cli(source.port, "EXISTS", key).strip() == "1", 10, "the lock")
            r = self.nx("-u", url, "lock", "-n", key)
            self.assertEqual(r.returncode, 75, r.stderr)
            moved = self.start_migration(slot, source, target)
            self.assertIn(key, moved)
            # Mid-migration: the key is on the target, the slot still the source's,
            # so the next renewal can only land there through ASK.
            migrated = value_on_target()
            self.assertNotEqual(migrated, "")
            value = renewed_on_target(migrated)
            self.assertIs(self.cluster.owner(key), source)
            r = self.nx("-u", url, "lock", "-n", key)
            self.assertEqual(r.returncode, 75, r.stderr)
            self.finish_migration(slot, source, target)
            self.assertIs(self.cluster.owner(key), target)
            # Migrated: the next renewal goes there through MOVED.
            renewed_on_target(value)
            self.assertIsNone(job.poll(), "the job ended before the checks")
            for seed in (source, target):  # a taker through either node: busy
                r = self.nx("-u", self.cluster.url(seed), "lock", "-n", key)
                self.assertEqual(r.returncode, 75, r.stderr)
            open(done_path, "w").close()
            job.wait(timeout=30)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
        with open(err_path, "rb") as f:
            err = f.read().decode(errors="replace")
        self.assertEqual(job.returncode, 0, err)
        # Released on the new owner, and the job saw the cluster send it there both ways.
        self.assertEqual(cli(target.port, "EXISTS", key).strip(), "0")
        for redirect in ("ASK", "MOVED"):
            self.assertRegex(err, r"%s %d 127\.0\.0\.1:%d; following"
                             % (redirect, slot, target.port))
        self.assertNotIn("renewal failed", err)


class TestReplicasOnACluster(NxlockTestCase):
    """Three masters with a replica each: --replicas 1 waits for the key's master's replica."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster = Cluster(replicas=1)
        cls.addClassCleanup(cls.cluster.stop)

    def test_confirmed_by_the_replica_of_the_keys_master(self):
        seed, owner = self.cluster.masters()[:2]
        key = self.cluster.key_on(owner, "confirmed")
        url = self.cluster.url(seed)
        r = self.nx("-u", url, "-v", "--replicas", "1", "lock", "-n", "--ttl", "30", key)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr.decode(), r"WAIT 1 \d+ → 1")
        value = r.stdout.decode().strip()
        self.assertEqual(cli(owner.port, "GET", key).strip(), value)
        r = self.nx("-u", url, "--replicas", "1", "unlock", key, value)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("-u", url, "--replicas", "1", "run-locked", "-n", key, "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(cli(owner.port, "EXISTS", key).strip(), "0")

    def test_the_keys_replica_stopped_means_no_lock(self):
        seed, owner = self.cluster.masters()[:2]
        key = self.cluster.key_on(owner, "unconfirmed")
        url = self.cluster.url(seed)
        replica = self.cluster.replica_of(owner).process
        replica.send_signal(signal.SIGSTOP)
        try:
            r = self.nx("-u", url, "--replicas", "1", "--io-timeout", "0.5", "lock", "-n",
                        "--ttl", "30", key)
            self.assertOneLineError(r, 69, "0 of 1 replicas", "undone")
            self.assertEqual(r.stdout, b"")
            self.assertEqual(cli(owner.port, "EXISTS", key).strip(), "0")
            marker = os.path.join(self.tmp, "ran")
            r = self.nx("-u", url, "--replicas", "1", "--io-timeout", "0.5", "run-locked", "-n", key,
                        "touch", marker)
            self.assertOneLineError(r, 69, "0 of 1 replicas")
            self.assertFalse(os.path.exists(marker))
            self.assertEqual(cli(owner.port, "EXISTS", key).strip(), "0")
            # Meanwhile a key of another master, whose replica runs, is confirmed.
            other = self.cluster.key_on(seed, "elsewhere")
            r = self.nx("-u", url, "--replicas", "1", "lock", "-n", "--ttl", "30", other)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            replica.send_signal(signal.SIGCONT)
