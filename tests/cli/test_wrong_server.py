"""A URL that reaches the wrong kind of server: each says what answered, 69, in commands and doctor.

Redis closes the connection on an HTTP request, etcd on a Redis command, each
without a word: nxlock then asks in the other protocol, and says what answered
(man page, EXIT STATUS, 69). An HTTP server that answers etcd's paths with 200
and `{}` is no etcd member: every answer of etcd carries its response header
(the cluster's and the member's ids).
"""
import http.server
import re
import threading
import unittest

from etcd_harness import HAVE_ETCD, EtcdCluster
from harness import NxlockTestCase, RedisServer


COMMANDS = (("lock", "-n", "k"), ("status", "k"), ("get", "k"), ("setnx", "k", "v"), ("list",),
            ("unlock", "--force", "k"), ("run-locked", "-n", "k", "true"))


class EmptyJsonHandler(http.server.BaseHTTPRequestHandler):
    """Answers every POST with 200 and `{}`, keeping the connection open, as a
    catch-all JSON service would; logs nothing."""
    protocol_version = "HTTP/1.1"
    server_version = "NotEtcd/1.0"
    sys_version = ""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class WrongServer(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(1)
        cls.addClassCleanup(cls.etcd.stop)
        cls.redis = RedisServer()
        cls.addClassCleanup(cls.redis.stop)
        cls.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EmptyJsonHandler)
        cls.http.daemon_threads = True
        thread = threading.Thread(target=cls.http.serve_forever, daemon=True)
        thread.start()
        cls.addClassCleanup(cls.http.server_close)
        cls.addClassCleanup(cls.http.shutdown)

    def assertDoctorSaysProtocol(self, url, said, not_said):
        r = self.nx("-u", url, "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 69, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^FAIL protocol %s \u2014 .*host and port$" % re.escape(said))
        self.assertNotIn(not_said, out)
        self.assertOneLineError(r, 69, said)

    def test_a_server_that_answers_every_post_with_empty_json_is_not_etcd(self):
        url = "etcd://127.0.0.1:%d" % self.http.server_address[1]
        said = ("not an etcd v3 gateway (it answered `HTTP/1.1 200 OK` from `NotEtcd/1.0` "
                "without etcd's response header)")
        for args in COMMANDS:
            with self.subTest(args=args):
                self.assertOneLineError(self.nx("-u", url, *args), 69, said)
        self.assertDoctorSaysProtocol(url, said, "etcd ?")

    def test_a_redis_url_on_an_etcd_port_says_etcd_answered(self):
        url = "redis://127.0.0.1:%d" % self.etcd.members[0].client_port
        said = re.compile(r"not a Redis server \(it closed the connection on a Redis command, and "
                          r"answers HTTP: etcd 3\.[0-9.]+; its URLs are etcd://\)")
        for args in COMMANDS:
            with self.subTest(args=args):
                r = self.nx("-u", url, *args)
                self.assertEqual(r.returncode, 69, r.stderr)
                self.assertRegex(r.stderr.decode(), said)
        r = self.nx("-u", url, "doctor")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 69, out + r.stderr.decode())
        self.assertRegex(out, r"(?m)^FAIL protocol " + said.pattern + r" \u2014 .*host and port$")
        self.assertNotIn("database", out)

    def test_an_etcd_url_on_a_redis_port_says_redis_answered(self):
        for url in ("etcd://127.0.0.1:%d" % self.redis.port,
                    "etcd://127.0.0.1:%d,127.0.0.1:%d" % (self.redis.port, self.redis.port)):
            said = ("not an etcd v3 gateway (it closed the connection on an HTTP request, and "
                    "answers Redis's PING with `+PONG`: a Redis server? its URLs are redis://)")
            for args in COMMANDS:
                with self.subTest(url=url, args=args):
                    r = self.nx("-u", url, *args)
                    self.assertEqual(r.returncode, 69, r.stderr)
                    self.assertIn(said, r.stderr.decode())
            self.assertDoctorSaysProtocol(url, said, "majority")


if __name__ == "__main__":
    unittest.main()
