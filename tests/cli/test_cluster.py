"""Redis Cluster: three masters made by redis-cli --cluster create; keys on every node, reached through any seed."""
import os
import subprocess
import time

from harness import COMMAND_TIMEOUT, REDIS_CLI, NxlockTestCase, RedisServer, free_port
from sentinel_harness import cli, wait_for


def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    """The Cluster specification's HASH_SLOT (hash tags included)."""
    data = key.encode()
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1:end]
    return crc16(data) % 16384


class ClusterNode(RedisServer):
    """A cluster-enabled redis-server; its bus port is a free port of its own
    (the default, port + 10000, may be taken or beyond 65535)."""

    def _start_args(self):
        return super()._start_args() + [
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "5000", "--cluster-port", str(free_port())]


class Cluster:
    def __init__(self, masters=3):
        self.nodes = []
        try:
            for _ in range(masters):
                self.nodes.append(ClusterNode())
            subprocess.run([REDIS_CLI, "--cluster", "create",
                            *["127.0.0.1:%d" % n.port for n in self.nodes],
                            "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, capture_output=True, timeout=COMMAND_TIMEOUT)
            for n in self.nodes:
                wait_for(lambda: "cluster_state:ok" in cli(n.port, "CLUSTER", "INFO"), 20,
                         "the cluster to be ready")
        except BaseException:
            self.stop()
            raise

    def owner(self, key):
        """The node whose slots hold `key` (from CLUSTER NODES)."""
        slot = key_slot(key)
        for line in cli(self.nodes[0].port, "CLUSTER", "NODES").splitlines():
            fields = line.split()
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            for part in fields[8:]:
                low, _, high = part.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    return next(n for n in self.nodes if n.port == port)
        raise AssertionError("no owner for slot %d" % slot)

    def key_on(self, node, prefix="k"):
        """A key that lives on `node`."""
        for i in range(10000):
            key = "%s%d" % (prefix, i)
            if self.owner(key) is node:
                return key
        raise AssertionError("no key found for the node")

    def url(self, *nodes):
        return "redis://" + ",".join("127.0.0.1:%d" % n.port for n in (nodes or self.nodes[:1]))

    def flushall(self):
        for n in self.nodes:
            cli(n.port, "FLUSHALL")

    def stop(self):
        for n in self.nodes:
            n.stop()


class ClusterTestCase(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster = Cluster()
        cls.addClassCleanup(cls.cluster.stop)

    def setUp(self):
        super().setUp()
        self.cluster.flushall()


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
        # The waiter subscribes through another node than the one that holds the key.
        waiter = self.popen("-u", self.cluster.url(self.cluster.nodes[2]), "-v", "lock", "-w", "30",
                            "--ttl", "60", key, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1)
        self.assertIsNone(waiter.poll())
        released = time.monotonic()
        r = self.nx("-u", self.cluster.url(self.cluster.nodes[0]), "unlock", key, value)
        self.assertEqual(r.returncode, 0, r.stderr)
        out, err = waiter.communicate(timeout=30)
        woke = time.monotonic() - released
        self.assertEqual(waiter.returncode, 0, err)
        # Woken by the release's PUBLISH, which the cluster carried to the
        # waiter's node (traced as a message on its subscriber connection).
        self.assertIn("(subscriber) ← [message".encode(), err)
        self.assertLess(woke, 5)

    def nx_bin(self):
        from harness import BIN
        return BIN
