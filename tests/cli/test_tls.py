"""rediss://: every command over TLS against real TLS-only redis-servers, and each way verification fails.

The certificates are made by the test with the openssl CLI: a CA that signed the
servers' certificates, another CA that did not, a certificate for another host
name, and a client certificate for a server that demands one.
"""
import os
import subprocess
import time
import unittest

from deployments import Certificates, TlsRedisServer
from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase, RedisServer, read, wait_for


class Tls(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = Certificates()
        cls.addClassCleanup(subprocess.run, ["rm", "-rf", cls.certs.dir])
        cls.tls = TlsRedisServer(cls.certs)
        cls.addClassCleanup(cls.tls.stop)
        cls.other_host = TlsRedisServer(cls.certs, cert="other-host")
        cls.addClassCleanup(cls.other_host.stop)
        cls.mutual = TlsRedisServer(cls.certs, auth_clients="yes")
        cls.addClassCleanup(cls.mutual.stop)
        cls.plain = RedisServer()
        cls.addClassCleanup(cls.plain.stop)

    def setUp(self):
        super().setUp()
        for server in (self.tls, self.other_host, self.mutual):
            server.cli("FLUSHALL")
        self.ca = ["--cacert", self.certs.path("ca.crt")]

    def nxs(self, *args, server=None, host="127.0.0.1", **kwargs):
        server = server or self.tls
        return self.nx("-u", server.url_for(host), *args, **kwargs)

    def test_every_command_over_tls(self):
        for host in ("127.0.0.1", "localhost"):  # an IP and a DNS name, both checked
            with self.subTest(host=host):
                self.tls.cli("FLUSHALL")

                def ok(*args):
                    r = self.nxs(*self.ca, *args, host=host)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(r.stderr, b"")
                    return r.stdout.strip()

                self.assertEqual(ok("setnx", "k", "v1"), b"1")
                self.assertEqual(ok("get", "k"), b"v1")
                self.assertEqual(ok("getset", "k", "v2"), b"v1")
                self.assertEqual(self.tls.cli("GET", "k").strip(), b"v2")
                self.assertEqual(ok("del", "k"), b"1")
                value = ok("lock", "-t", "60", "job")
                self.assertIn(b"held", ok("status", "job"))
                value = ok("renew", "-t", "60", "job", value)
                ok("unlock", "job", value)
                self.assertEqual(self.tls.cli("EXISTS", "job").strip(), b"0")

    def test_run_locked_over_tls(self):
        r = self.nxs(*self.ca, "run-locked", "-t", "30", "job", "sh", "-c",
                     "redis-cli -s %s GET job" % self.tls.unix_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout.strip(), rb"^\d+")  # the child saw the lock held
        self.assertEqual(self.tls.cli("EXISTS", "job").strip(), b"0")  # released

    def test_waiter_is_woken_by_a_message_over_tls(self):
        # A wake-up published while the lock is still held reaches the waiter's
        # TLS subscription: it looks again, finds the lock held and keeps waiting.
        # (Asserting on the release's own message raced with the waiter's poll
        # tick, which may take the freed lock before the message is read.)
        value = self.nxs(*self.ca, "lock", "-t", "60", "job").stdout.strip()
        trace_path = os.path.join(self.tmp, "waiter.err")
        with open(trace_path, "wb") as trace:
            waiter = self.popen("-u", self.tls.url_for(), *self.ca, "-v", "lock", "-w", "20", "job",
                                stdout=subprocess.PIPE, stderr=trace)
        self.addCleanup(waiter.kill)
        self.assertTrue(wait_for(lambda: self.tls.cli("PUBSUB", "NUMSUB", "nxlock:wake:job")
                                 .split()[-1] == b"1"), "the waiter never subscribed")
        self.tls.cli("PUBLISH", "nxlock:wake:job", "1")
        message = "(subscriber) \u2190 [message nxlock:wake:job 1]"
        self.assertTrue(wait_for(lambda: message in read(trace_path)),
                        "the waiter's TLS subscription never delivered the message")
        self.assertIsNone(waiter.poll(), "a wake-up alone let the waiter take a held lock")
        self.assertEqual(self.nxs(*self.ca, "unlock", "job", value).returncode, 0)
        out, _ = waiter.communicate(timeout=COMMAND_TIMEOUT)
        self.assertEqual(waiter.returncode, 0, read(trace_path))
        self.assertRegex(out, rb"^\d+\n$")

    def test_unknown_ca_is_77_naming_the_url_and_reason(self):
        r = self.nxs("--cacert", self.certs.path("other-ca.crt"), "get", "k")
        self.assertOneLineError(r, 77, self.tls.url_for(), "TLS certificate verification failed")
        # The system's CAs do not know the test CA either.
        self.assertOneLineError(self.nxs("get", "k"), 77, "verification failed")

    def test_an_expired_certificate_is_77(self):
        # The certificates are valid for 3 days; ten days on, nxlock (under
        # libfaketime, its monotonic clock left alone) finds them expired.
        env = dict(self.env, FAKETIME_DONT_FAKE_MONOTONIC="1")
        # Under AddressSanitizer (scripts/test), libfaketime is preloaded before
        # the ASan runtime, which it otherwise refuses.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                     "verify_asan_link_order=0"]))
        r = subprocess.run(["faketime", "-f", "+10d", BIN, "-u", self.tls.url_for(), *self.ca,
                            "get", "k"], capture_output=True, env=env, timeout=COMMAND_TIMEOUT)
        self.assertOneLineError(r, 77, self.tls.url_for(), "certificate has expired")

    def test_wrong_host_name_is_77(self):
        r = self.nxs(*self.ca, "get", "k", server=self.other_host)
        self.assertOneLineError(r, 77, "IP address mismatch")
        r = self.nxs(*self.ca, "get", "k", server=self.other_host, host="localhost")
        self.assertOneLineError(r, 77, "hostname mismatch")

    def test_sni_names_the_host_to_check(self):
        r = self.nxs(*self.ca, "--sni", "other.example", "setnx", "k", "v", server=self.other_host)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nxs(*self.ca, "--sni", "wrong.example", "get", "k", server=self.other_host)
        self.assertOneLineError(r, 77, "hostname mismatch")

    def test_insecure_skips_verification_and_says_so(self):
        r = self.nxs("--insecure", "setnx", "k", "v", server=self.other_host)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"--insecure", r.stderr)
        self.assertIn(b"not verified", r.stderr)
        r = self.nxs("--insecure", "-q", "get", "k", server=self.other_host)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"v\n", b""))

    def test_client_certificate(self):
        # Without one, the server refuses us: TLS 1.3 clients finish their side
        # of the handshake first, so the refusal comes as an alert on the first
        # read. It is a permission matter (77), like an unknown CA, and says
        # what is missing.
        r = self.nxs(*self.ca, "get", "k", server=self.mutual)
        self.assertOneLineError(r, 77, self.mutual.url_for(), "--cert")
        r = self.nxs(*self.ca, "--cert", self.certs.path("client.crt"), "--key",
                     self.certs.path("client.key"), "setnx", "k", "v", server=self.mutual)
        self.assertEqual((r.returncode, r.stdout), (0, b"1\n"), r.stderr)
        # --cert without --key is a usage error.
        r = self.nxs(*self.ca, "--cert", self.certs.path("client.crt"), "get", "k")
        self.assertEqual(r.returncode, 64, r.stderr)

    def test_environment_variables(self):
        env = dict(self.env, NXLOCK_URL=self.mutual.url_for("localhost"),
                   NXLOCK_CACERT=self.certs.path("ca.crt"),
                   NXLOCK_CERT=self.certs.path("client.crt"),
                   NXLOCK_CERT_KEY=self.certs.path("client.key"))
        r = self.nx("setnx", "k", "v", env=env)
        self.assertEqual((r.returncode, r.stdout), (0, b"1\n"), r.stderr)
        del env["NXLOCK_CACERT"]
        env["NXLOCK_CACERTDIR"] = self.certs.cadir
        r = self.nx("get", "k", env=env)
        self.assertEqual((r.returncode, r.stdout), (0, b"v\n"), r.stderr)

    def test_plain_redis_to_a_tls_port_is_69_within_the_timeout(self):
        started = time.monotonic()
        r = self.nx("-u", "redis://127.0.0.1:%d" % self.tls.tls_port, "--io-timeout", "2", "get", "k")
        self.assertOneLineError(r, 69, "redis://127.0.0.1:%d" % self.tls.tls_port)
        self.assertLess(time.monotonic() - started, 6)

    def test_tls_to_a_plain_port_is_69_within_the_timeout(self):
        started = time.monotonic()
        r = self.nx("-u", "rediss://127.0.0.1:%d" % self.plain.port, *self.ca, "--io-timeout", "2",
                    "get", "k")
        self.assertOneLineError(r, 69, "rediss://127.0.0.1:%d" % self.plain.port)
        self.assertLess(time.monotonic() - started, 6)

    def test_a_bad_cacert_file_is_a_usage_error(self):
        r = self.nxs("--cacert", os.path.join(self.tmp, "missing.crt"), "get", "k")
        self.assertOneLineError(r, 64, "missing.crt")


if __name__ == "__main__":
    unittest.main()
