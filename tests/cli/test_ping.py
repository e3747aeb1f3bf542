"""run-locked --ping URL: healthchecks.io's protocol (URL/start as the job starts, URL
or URL/N after the release, one rid), against checkers the test starts on loopback:
one that records, an HTTPS one with a test CA, one that refuses, one that never
answers, and a name that does not resolve (a resolver of the test's own, in a mount
namespace). A ping never changes the exit status nor holds nxlock past
--ping-timeout, and the URL's path (the check's credential) is never shown."""
import http.server
import json
import os
import random
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from deployments import make_ca, make_cert
from harness import BIN, NxlockTestCase, free_port, smoke

SECRET = "0f1e2d3c-secret-uuid"
RID = re.compile(r"^rid=([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})$")


class Checker:
    """A healthchecks-like HTTP(S) server on loopback that records each request's
    path and query; `fail_first` answers the first N requests 500, `delay` sleeps
    before answering."""

    def __init__(self, context=None):
        self.requests = []
        self.on_start = None  # called as a start ping comes
        self.fail_first = 0
        self.delay = 0.0
        checker = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                time.sleep(checker.delay)  # the fault itself: a checker this slow to answer
                path, _, query = self.path.partition("?")
                if path.endswith("/start") and checker.on_start:
                    checker.on_start()
                checker.requests.append((path, query, time.monotonic()))
                failing = checker.fail_first > 0
                checker.fail_first -= 1 if failing else 0
                body = b"error" if failing else b"OK"
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, scheme="http", path="/" + SECRET):
        return "%s://127.0.0.1:%d%s" % (scheme, self.port, path)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def paths(self):
        return [path for path, _, _ in self.requests]

    def rids(self):
        found = set()
        for _, query, _ in self.requests:
            match = RID.match(query)
            found.add(match.group(1) if match else query)
        return found


class Ping(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()
        cls.cert_dir = tempfile.mkdtemp(prefix="nxlock-ping-ca-")
        cls.addClassCleanup(shutil.rmtree, cls.cert_dir, True)
        make_ca(cls.cert_dir, "ca")
        make_ca(cls.cert_dir, "other-ca")
        make_cert(cls.cert_dir, "server", "ca", "localhost",
                  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")

    def checker(self, tls=False):
        context = None
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(os.path.join(self.cert_dir, "server.crt"),
                                    os.path.join(self.cert_dir, "server.key"))
        checker = Checker(context)
        self.addCleanup(checker.stop)
        return checker

    def silent_listener(self):
        """A socket that accepts connections (the kernel's backlog) and never answers."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self.addCleanup(listener.close)
        return listener.getsockname()[1]

    def run_timed(self, *args, env=None):
        started = time.monotonic()
        result = self.nx(*args, env=env)
        return result, time.monotonic() - started

    def assertNoSecret(self, *texts):
        for text in texts:
            if isinstance(text, bytes):
                text = text.decode(errors="replace")
            self.assertNotIn(SECRET, text)
            self.assertNotIn(SECRET[:8], text)

    @smoke
    def test_start_then_success_with_one_rid_after_the_release(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                checker = self.checker()
                # The job sees the start ping's arrival; the end ping comes once the
                # lock is free again (another nxlock takes it at once).
                result = self.nx(*backend.args(), "run-locked", "--ping", checker.url(), "pinged",
                                 "sh", "-c", "sleep 0.3")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(checker.paths(), ["/%s/start" % SECRET, "/" + SECRET])
                rids = checker.rids()
                self.assertEqual(len(rids), 1, checker.requests)
                self.assertRegex(next(iter(rids)), r"^[0-9a-f-]{36}$")
                self.assertEqual(result.stderr, b"")
                # A second run has its own rid.
                self.nx(*backend.args(), "run-locked", "--ping", checker.url(), "pinged", "true")
                self.assertEqual(len(checker.rids()), 2)

    def test_the_start_ping_goes_out_while_the_job_runs(self):
        checker = self.checker()
        marker = os.path.join(self.tmp, "start-ping-came")
        checker.on_start = lambda: open(marker, "w").close()
        # The job waits for the start ping: it comes while the job runs, not after.
        result = self.nx("run-locked", "--ping", checker.url(), "beside", "sh", "-c",
                         'for i in $(seq 100); do [ -e "$0" ] && exit 0; sleep 0.05; done; exit 9',
                         marker)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(checker.paths(), ["/%s/start" % SECRET, "/" + SECRET])

    def test_end_ping_after_the_release(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                checker = self.checker()
                # The end ping's handler looks at the lock: free by then.
                seen = []
                orig = checker.server.RequestHandlerClass.do_GET

                def looking(handler):
                    if not handler.path.partition("?")[0].endswith("/start"):
                        r = self.nx(*backend.args(), "lock", "-n", "-t", "5", "released")
                        seen.append(r.returncode)
                    orig(handler)
                checker.server.RequestHandlerClass.do_GET = looking
                result = self.nx(*backend.args(), "run-locked", "--ping", checker.url(),
                                 "released", "true")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(seen, [0])
                self.nx(*backend.args(), "unlock", "--force", "released")

    @smoke
    def test_exit_statuses_go_as_url_slash_n(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                checker = self.checker()
                r = self.nx(*backend.args(), "run-locked", "--ping", checker.url(), "st",
                            "sh", "-c", "exit 3")
                self.assertEqual(r.returncode, 3, r.stderr)
                r = self.nx(*backend.args(), "run-locked", "--max-runtime", "0.2", "--ping",
                            checker.url(), "st", "sleep", "10")
                self.assertEqual(r.returncode, 124, r.stderr)
                self.assertEqual(checker.paths(),
                                 ["/%s/start" % SECRET, "/%s/3" % SECRET,
                                  "/%s/start" % SECRET, "/%s/124" % SECRET])

    def test_a_lost_lock_pings_79(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                checker = self.checker()
                r = self.nx(*backend.args(), "run-locked", "--no-renew", "-t", "1",
                            "--kill-after", "0.1", "--ping", checker.url(), "lost", "sleep", "10")
                self.assertEqual(r.returncode, 79, r.stderr)
                self.assertEqual(checker.paths(), ["/%s/start" % SECRET, "/%s/79" % SECRET])

    def test_a_command_not_found_pings_127_without_a_start(self):
        checker = self.checker()
        r = self.nx("run-locked", "--ping", checker.url(), "nf", "/nonexistent/command")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertEqual(checker.paths(), ["/%s/127" % SECRET])

    @smoke
    def test_a_busy_run_pings_nothing_unless_asked(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                checker = self.checker()
                held = self.nx(*backend.args(), "lock", "-t", "30", "busy")
                self.assertEqual(held.returncode, 0, held.stderr)
                r = self.nx(*backend.args(), "run-locked", "-n", "--ping", checker.url(),
                            "busy", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertEqual(checker.requests, [])
                r = self.nx(*backend.args(), "run-locked", "-n", "--ping", checker.url(),
                            "--ping-on-busy", "busy", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertEqual(checker.paths(), ["/" + SECRET])
                self.assertEqual(len(checker.rids()), 1)
                self.nx(*backend.args(), "unlock", "--force", "busy")

    def test_a_silent_checker_costs_at_most_the_bound(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                port = self.silent_listener()
                url = "http://127.0.0.1:%d/%s" % (port, SECRET)
                marker = os.path.join(self.tmp, backend.name + "-ran")
                # -t 1: the job runs at once, and its lock is renewed while the
                # start ping hangs (not lost: 79); the end costs 1 s at most.
                r, elapsed = self.run_timed(*backend.args(), "run-locked", "-t", "1",
                                            "--ping", url, "--ping-timeout", "1", "silent",
                                            "sh", "-c", "touch \"$0\"; sleep 1.5; exit 5", marker)
                self.assertEqual(r.returncode, 5, r.stderr)
                self.assertTrue(os.path.exists(marker))
                self.assertLess(elapsed, 1.5 + 1.0 + 0.8, r.stderr)
                lines = r.stderr.decode().strip().splitlines()
                self.assertTrue(lines, r.stderr)
                for line in lines:
                    self.assertRegex(line, r"^nxlock: ping http://127\.0\.0\.1:%d \(" % port)
                self.assertNoSecret(r.stderr)
                # The lock was released before the end ping: free at once.
                free = self.nx(*backend.args(), "lock", "-n", "silent")
                self.assertEqual(free.returncode, 0, free.stderr)
                self.nx(*backend.args(), "unlock", "--force", "silent")

    def test_the_end_ping_alone_is_bounded(self):
        port = self.silent_listener()
        url = "http://127.0.0.1:%d/%s" % (port, SECRET)
        r, elapsed = self.run_timed("run-locked", "-n", "--ping", url, "--ping-timeout", "0.5",
                                    "nf", "/nonexistent/command")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertLess(elapsed, 0.5 + 0.7)
        self.assertIn(b"ping http://127.0.0.1:%d (exit status 127)" % port, r.stderr)

    def test_a_refusing_checker_is_one_line_and_changes_nothing(self):
        port = free_port()
        url = "http://127.0.0.1:%d/%s" % (port, SECRET)
        r = self.nx("run-locked", "--ping", url, "refused", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stderr.decode().strip().splitlines()
        self.assertEqual(len(lines), 2, r.stderr)  # the start's and the end's
        self.assertIn("(start) failed: connection refused", lines[0])
        self.assertIn("(success) failed: connection refused", lines[1])
        self.assertNoSecret(r.stderr)
        q = self.nx("-q", "run-locked", "--ping", url, "refused", "true")
        self.assertEqual((q.returncode, q.stderr), (0, b""))

    def test_one_retry_inside_the_bound(self):
        checker = self.checker()
        checker.fail_first = 1
        r = self.nx("run-locked", "--ping", checker.url(), "retry", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        self.assertEqual(checker.paths(),
                         ["/%s/start" % SECRET, "/%s/start" % SECRET, "/" + SECRET])
        checker.fail_first = 4
        r = self.nx("run-locked", "--ping", checker.url(), "retry", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"answered HTTP 500", r.stderr)

    def resolver_namespace(self, nameserver):
        """The argv prefix that runs a command with /etc/resolv.conf naming only
        `nameserver` (a mount namespace of its own: nothing asks a real resolver)."""
        if os.geteuid() != 0:
            self.skipTest("needs root for a mount namespace")
        conf = os.path.join(self.tmp, "resolv.conf")
        with open(conf, "w") as f:
            f.write("nameserver %s\noptions timeout:5 attempts:2\n" % nameserver)
        return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount --bind "$0" /etc/resolv.conf && exec "$@"', conf]

    def test_a_name_that_does_not_resolve(self):
        # A resolver that never answers, on an address of loopback's own for this test.
        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(silent.close)
        resolver = "127.%d.%d.1" % (random.randrange(1, 255), random.randrange(1, 255))
        silent.bind((resolver, 53))
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                # The bound holds, name resolution included.
                prefix = self.resolver_namespace(resolver)
                url = "http://nxlock-checker.invalid/" + SECRET
                started = time.monotonic()
                r = subprocess.run(prefix + [BIN, *backend.args(), "run-locked", "--ping", url,
                                             "--ping-timeout", "1", "unresolved", "true"],
                                   capture_output=True, env=self.env, timeout=30)
                elapsed = time.monotonic() - started
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertLess(elapsed, 2.0 + 0.8)
                self.assertIn(b"ping http://nxlock-checker.invalid (", r.stderr)
                self.assertNoSecret(r.stderr)
                # A resolver that refuses: the failure is said, at once.
                prefix = self.resolver_namespace("127.0.0.1")
                r = subprocess.run(prefix + [BIN, *backend.args(), "run-locked", "--ping", url,
                                             "unresolved", "true"],
                                   capture_output=True, env=self.env, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(b"cannot resolve 'nxlock-checker.invalid'", r.stderr)

    def test_https_verified_by_ping_cacert_not_the_backends(self):
        checker = self.checker(tls=True)
        ca = os.path.join(self.cert_dir, "ca.crt")
        url = checker.url("https")
        r = self.nx("run-locked", "--ping", url, "--ping-cacert", ca, "tls", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        self.assertEqual(checker.paths(), ["/%s/start" % SECRET, "/" + SECRET])
        # Neither the system's CAs, nor the backend's --cacert and --insecure, trust it.
        for global_options in ([], ["--cacert", ca], ["--insecure"]):
            with self.subTest(options=global_options):
                r = self.nx(*global_options, "run-locked", "--ping", url, "tls", "true")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(b"certificate verification failed", r.stderr)
        # A CA that did not sign it.
        other = os.path.join(self.cert_dir, "other-ca.crt")
        r = self.nx("run-locked", "--ping", url, "--ping-cacert", other, "tls", "true")
        self.assertIn(b"certificate verification failed", r.stderr)
        self.assertEqual(len(checker.requests), 2)

    def test_the_path_is_never_shown(self):
        checker = self.checker()
        metrics = os.path.join(self.tmp, "metrics")
        os.mkdir(metrics)
        r = self.nx("-v", "--json", "run-locked", "--metrics-dir", metrics, "--ping",
                    checker.url(path="/" + SECRET + "?create=1"), "shown", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"ping http://127.0.0.1:%d" % checker.port, r.stderr)  # the trace
        out = json.loads(r.stdout)
        self.assertEqual(out["ping"], {"to": "http://127.0.0.1:%d" % checker.port,
                                       "answered": True})
        texts = [r.stdout, r.stderr]
        for name in os.listdir(metrics):
            with open(os.path.join(metrics, name)) as f:
                texts.append(f.read())
        self.assertNoSecret(*texts)
        self.assertEqual(checker.requests[1][1].split("&")[0], "create=1")
        bad = self.nx("run-locked", "--ping", "ftp://h/" + SECRET, "k", "true")
        self.assertOneLineError(bad, 64, "--ping")
        self.assertNoSecret(bad.stderr)
        bad = self.nx("run-locked", "--ping", "http://user:%s@h/x" % SECRET, "k", "true")
        self.assertOneLineError(bad, 64, "--ping")
        self.assertNoSecret(bad.stderr)

    def test_from_the_environment_or_a_file_with_key_and_kept_from_the_job(self):
        checker = self.checker()
        env = dict(self.env, NXLOCK_PING_URL=checker.url(path="/ping/%s/{key}" % SECRET))
        out = os.path.join(self.tmp, "env")
        r = self.nx("run-locked", "nightly backup", "sh", "-c",
                    "echo \"${NXLOCK_PING_URL-unset}\" > \"$0\"", out, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(checker.paths(), ["/ping/%s/nightly%%20backup/start" % SECRET,
                                           "/ping/%s/nightly%%20backup" % SECRET])
        with open(out) as f:
            self.assertEqual(f.read().strip(), "unset")
        r = self.nx("run-locked", "--inherit-credentials", "k", "sh", "-c",
                    "echo \"${NXLOCK_PING_URL-unset}\" > \"$0\"", out, env=env)
        with open(out) as f:
            self.assertIn(SECRET, f.read())
        url_file = os.path.join(self.tmp, "ping-url")
        with open(url_file, "w") as f:
            f.write(checker.url(path="/file/" + SECRET) + "\n")
        del checker.requests[:]
        r = self.nx("run-locked", "--ping-file", url_file, "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(checker.paths(), ["/file/%s/start" % SECRET, "/file/" + SECRET])
        missing = self.nx("run-locked", "--ping-file", url_file + ".none", "k", "true")
        self.assertOneLineError(missing, 64, "--ping-file")


if __name__ == "__main__":
    unittest.main()
