"""rediss+sentinel://: a TLS-only Sentinel in front of a TLS-only master and replica, commands and a failover.

Every server listens with TLS only on TCP (plus a unix socket for the test's own
checks); the Sentinel talks TLS to the servers too (tls-replication yes), so
the failover it runs, and the one nxlock follows, is over TLS end to end.
"""
import shutil
import subprocess

from deployments import Certificates, TlsRedisServer
from harness import COMMAND_TIMEOUT, REDIS_CLI, NxlockTestCase
from sentinel_harness import MASTER_NAME, Deployment, Sentinel, failover_round, wait_for


class TlsNode(TlsRedisServer):
    """A TLS-only redis-server that also replicates over TLS (as a replica, or after a failover)."""

    def __init__(self, certs, replica_of=None):
        self.replica_of = replica_of
        super().__init__(certs)

    def _start_args(self):
        args = super()._start_args() + ["--tls-replication", "yes"]
        if self.replica_of:
            args += ["--replicaof", "127.0.0.1", str(self.replica_of)]
        return args


class TlsSentinel(Sentinel):
    """A redis-sentinel listening with TLS only, and reaching the servers over TLS."""

    def __init__(self, certs, master_port):
        self.certs = certs
        super().__init__(master_port)

    def _listen_config(self):
        return ("port 0\ntls-port %d\n" % self.port
                + "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                % (self.certs.path("server.crt"), self.certs.path("server.key"),
                   self.certs.path("ca.crt"))
                + "tls-auth-clients no\ntls-replication yes\n")

    def cli(self, *args):
        try:
            return subprocess.run([REDIS_CLI, "--tls", "--cacert", self.certs.path("ca.crt"),
                                   "-h", "127.0.0.1", "-p", str(self.port), *args],
                                  capture_output=True, timeout=5).stdout.decode()
        except subprocess.TimeoutExpired:
            return ""


class TlsDeployment(Deployment):
    """sentinel_harness.Deployment over TLS: TLS-only servers and Sentinel."""

    def __init__(self, certs, replicas=1):
        self.certs = certs
        super().__init__(replicas)

    def _node(self, replica_of=None):
        return TlsNode(self.certs, replica_of=replica_of)

    def _sentinel(self, master_port):
        return TlsSentinel(self.certs, master_port)

    def url(self, scheme="rediss+sentinel"):
        return super().url(scheme=scheme)

    def cli(self, port, *args):
        """redis-cli on the unix socket of the server whose TLS port is `port` ("" if it is down)."""
        for server in [self.master, *self.replicas]:
            if server.port == port:
                try:
                    return subprocess.run([REDIS_CLI, "-s", server.unix_path, *args],
                                          capture_output=True,
                                          timeout=COMMAND_TIMEOUT).stdout.decode()
                except subprocess.TimeoutExpired:
                    return ""
        raise AssertionError("no server on port %d" % port)


class TlsSentinelTestCase(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.certs = Certificates()
        cls.addClassCleanup(shutil.rmtree, cls.certs.dir, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.deployment = TlsDeployment(self.certs)
        self.addCleanup(self.deployment.stop)
        self.url = self.deployment.url()
        self.env["NXLOCK_CACERT"] = self.certs.path("ca.crt")


class TestTlsSentinel(TlsSentinelTestCase):
    def test_commands_through_a_tls_sentinel(self):
        d = self.deployment
        r = self.nx("-u", self.url, "-v", "setnx", "k", "v1")
        self.assertEqual((r.returncode, r.stdout), (0, b"1\n"), r.stderr)
        # The Sentinel (over TLS) named the master, which nxlock then reached over TLS.
        self.assertIn(b"is at 127.0.0.1:%d" % d.master.port, r.stderr)
        self.assertEqual(d.cli(d.master.port, "GET", "k").strip(), "v1")
        r = self.nx("-u", self.url, "get", "k")
        self.assertEqual((r.returncode, r.stdout), (0, b"v1\n"), r.stderr)
        r = self.nx("-u", self.url, "lock", "--ttl", "30", "L")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.strip()
        r = self.nx("-u", self.url, "lock", "-n", "--ttl", "30", "L")
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.nx("-u", self.url, "unlock", "L", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(d.cli(d.master.port, "EXISTS", "L").strip(), "0")
        r = self.nx("-u", self.url, "--replicas", "1", "run-locked", "-n", "R", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_verification_applies_to_the_sentinel(self):
        # A CA that did not sign the Sentinel's certificate: refused (77), never a plain fallback.
        env = dict(self.env, NXLOCK_CACERT=self.certs.path("other-ca.crt"))
        r = self.nx("-u", self.url, "--io-timeout", "1", "get", "k", env=env)
        self.assertOneLineError(r, 77)
        # A plain-text Sentinel URL against a TLS-only Sentinel: nobody answers in plain text.
        r = self.nx("-u", self.deployment.url("redis+sentinel"), "--io-timeout", "1", "get", "k")
        self.assertOneLineError(r, 69, "no Sentinel reachable")

    def test_run_locked_follows_a_failover_over_tls(self):
        # Without --replicas the round waits for the replica to have the lock first.
        _, doubles = failover_round(self)
        self.assertEqual(doubles, 0)
