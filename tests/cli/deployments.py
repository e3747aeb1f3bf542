"""The real servers the CLI tests start beyond a lone Redis (servers.RedisServer), with
Sentinel's in sentinel_harness.py and etcd's in etcd_harness.py: a Redis Cluster (and a mixin
that gives a test class one), and TLS-only Redis with the certificates the test makes. Test
modules import these from here, never from one another."""
import os
import subprocess
import tempfile

from servers import (COMMAND_TIMEOUT, REDIS_CLI, REDIS_SERVER, RedisServer, free_port,
                     wait_answering)
from sentinel_harness import cli, wait_for


# --- Redis Cluster ---------------------------------------------------------------------------

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
    def __init__(self, masters=3, replicas=0):
        """`replicas` per master: `nodes` then holds the masters and their replicas."""
        self.nodes = []
        try:
            for _ in range(masters * (1 + replicas)):
                self.nodes.append(ClusterNode())
            subprocess.run([REDIS_CLI, "--cluster", "create",
                            *["127.0.0.1:%d" % n.port for n in self.nodes],
                            "--cluster-replicas", str(replicas), "--cluster-yes"],
                           check=True, capture_output=True, timeout=COMMAND_TIMEOUT)
            for n in self.nodes:
                wait_for(lambda: "cluster_state:ok" in cli(n.port, "CLUSTER", "INFO"), 20,
                         "the cluster to be ready")
            for n in self.nodes:
                if "role:slave" in cli(n.port, "INFO", "replication"):
                    wait_for(lambda: "master_link_status:up" in cli(n.port, "INFO", "replication"),
                             20, "the replica to sync")
        except BaseException:
            self.stop()
            raise

    def replica_of(self, master):
        """A replica of `master` (from CLUSTER NODES)."""
        master_id = cli(master.port, "CLUSTER", "MYID").strip()
        for line in cli(master.port, "CLUSTER", "NODES").splitlines():
            fields = line.split()
            if len(fields) > 3 and fields[3] == master_id:
                port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
                return next(n for n in self.nodes if n.port == port)
        raise AssertionError("no replica of the node on port %d" % master.port)

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

    def masters(self):
        return [n for n in self.nodes if "role:master" in cli(n.port, "INFO", "replication")]

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


class WithCluster:
    """Mixin: one three-master cluster per test class, flushed before each test."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster = Cluster()
        cls.addClassCleanup(cls.cluster.stop)

    def setUp(self):
        super().setUp()
        self.cluster.flushall()


# --- TLS -------------------------------------------------------------------------------------

OPENSSL = "openssl"


def openssl(*args, cwd):
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True,
                   timeout=COMMAND_TIMEOUT)


def make_ca(dir, name):
    openssl("req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-keyout", name + ".key", "-out", name + ".crt",
            "-days", "3", "-subj", "/CN=nxlock test " + name, cwd=dir)


def make_cert(dir, name, ca, subject, extensions):
    """A key and a certificate signed by `ca`, with the given X.509v3 extensions."""
    openssl("req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + subject, cwd=dir)
    with open(os.path.join(dir, name + ".ext"), "w") as f:
        f.write(extensions + "\n")
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "3", "-extfile", name + ".ext",
            cwd=dir)


class Certificates:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="nxlock-tls-")
        make_ca(self.dir, "ca")
        make_ca(self.dir, "other-ca")
        make_cert(self.dir, "server", "ca", "localhost",
                  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
        make_cert(self.dir, "other-host", "ca", "other.example",
                  "subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth")
        make_cert(self.dir, "client", "ca", "nxlock client", "extendedKeyUsage=clientAuth")
        # A hashed directory of CAs, for --cacertdir.
        self.cadir = os.path.join(self.dir, "cadir")
        os.mkdir(self.cadir)
        subprocess.run(["cp", self.path("ca.crt"), self.cadir], check=True)
        openssl("rehash", self.cadir, cwd=self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)


class TlsRedisServer(RedisServer):
    """A redis-server listening with TLS only (plus its plain unix socket, for the test's own checks)."""

    def __init__(self, certs, cert="server", auth_clients="no"):
        self.certs = certs
        self.tls_args = ["--tls-cert-file", certs.path(cert + ".crt"),
                         "--tls-key-file", certs.path(cert + ".key"),
                         "--tls-ca-cert-file", certs.path("ca.crt"),
                         "--tls-auth-clients", auth_clients]
        super().__init__()

    def _start_args(self):
        self.tls_port = self.port
        return [REDIS_SERVER, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
                "--unixsocket", self.unix_path, "--unixsocketperm", "700", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", self.dir,
                "--logfile", os.path.join(self.dir, "redis.log"), *self.tls_args]

    def _wait_ready(self):
        # The TCP port speaks only TLS: ask over the unix socket.
        return wait_answering(self.process, self.unix_path)

    def url_for(self, host="127.0.0.1"):
        return "rediss://%s:%d" % (host, self.tls_port)

    def cli(self, *args):
        return subprocess.run([REDIS_CLI, "-s", self.unix_path, *args], capture_output=True,
                              check=True, timeout=COMMAND_TIMEOUT).stdout
