"""Bad input and broken backends: one-line errors with the man page's exit statuses, on
every backend where the input reaches one (harness.backends)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from harness import NxlockTestCase, RedisServer, BIN, bucket_of, smoke


class BadInput(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.locked = RedisServer(password="s3cret-pw")
        cls.addClassCleanup(cls.locked.stop)
        cls.start_redis()

    def test_unknown_scheme_and_bad_port(self):
        for url in ["http://127.0.0.1", "redis://127.0.0.1:0", "redis://127.0.0.1:99999",
                    "redis://127.0.0.1:abc", "rediss://127.0.0.1:0", "file://relative/path"]:
            with self.subTest(url=url):
                self.assertOneLineError(self.nx("-u", url, "get", "k"), 64, url.split("//")[0])

    def test_bad_url_message_redacts_password(self):
        r = self.nx("-u", "redis://:hunter2@127.0.0.1:99999", "get", "k")
        self.assertOneLineError(r, 64, "***")
        self.assertNotIn(b"hunter2", r.stderr)

    def test_empty_key(self):
        for backend in self.backends(offering="lock"):
            # The key/value commands where the backend has them (a quorum refuses them).
            kv = (["get", ""], ["setnx", "", "v"], ["del", "a", ""]) if "kv" in backend.offers else ()
            for args in (*kv, ["lock", ""]):
                with self.subTest(backend=backend.name, args=args):
                    self.assertOneLineError(self.nx(*backend.args(), *args), 64, "empty key")

    @smoke
    def test_shared_and_slots_where_a_backend_has_neither_are_64(self):
        # A quorum and etcd (man page, LOCK KINDS and ETCD): nothing is taken.
        for backend in self.backends(lacking=("shared", "slots")):
            for kind in (["--shared"], ["--slots", "2"]):
                for command in (["lock", "-n"], ["run-locked", "-n"]):
                    with self.subTest(backend=backend.name, kind=kind[0], command=command[0]):
                        tail = ["true"] if command[0] == "run-locked" else []
                        r = self.nx(*backend.args(), *command, *kind, "k", *tail)
                        self.assertOneLineError(r, 64, kind[0])
                        r = self.nx(*backend.args(), "status", "k")
                        self.assertEqual(r.returncode, 1, r.stderr)  # free

    def test_connection_refused_is_69_quickly(self):
        start = time.monotonic()
        # A refusal is an answer: no waiting out the timeout (bounds kept far
        # apart, so a slow machine cannot blur them).
        r = self.nx("--url", "redis://127.0.0.1:1", "--io-timeout", "10", "get", "k")
        self.assertOneLineError(r, 69, "redis://127.0.0.1:1")
        self.assertLess(time.monotonic() - start, 5)

    def test_silent_server_is_69_within_timeout(self):
        # Accepts connections (the kernel completes the handshake) but never answers.
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            port = listener.getsockname()[1]
            start = time.monotonic()
            r = self.nx("-u", "redis://127.0.0.1:%d" % port, "--io-timeout", "0.5", "get", "k")
            elapsed = time.monotonic() - start
        self.assertOneLineError(r, 69)
        self.assertLess(elapsed, 4.0)  # the 0.5 s timeout, not the kernel's minutes

    def test_wrong_password_is_77_and_redacted(self):
        url = "redis://:wrong-pw@127.0.0.1:%d" % self.locked.port
        r = self.nx("-u", url, "get", "k")
        self.assertOneLineError(r, 77, "***")
        self.assertNotIn(b"wrong-pw", r.stderr)
        # Missing password: the server says NOAUTH.
        r = self.nx("-u", "redis://127.0.0.1:%d" % self.locked.port, "get", "k")
        self.assertOneLineError(r, 77)

    def test_password_sources(self):
        base = "redis://127.0.0.1:%d" % self.locked.port
        pwfile = os.path.join(self.tmp, "pw")
        with open(pwfile, "w") as f:
            f.write("s3cret-pw\n")
        self.assertEqual(self.nx("-u", base, "--password-file", pwfile, "setnx", "k", "v")
                         .returncode, 0)
        for name in ("NXLOCK_PASSWORD", "REDISCLI_AUTH"):
            env = dict(self.env, **{name: "s3cret-pw"})
            self.assertEqual(self.nx("-u", base, "get", "k", env=env).stdout, b"v\n")

    def test_wrongtype_is_65(self):
        self.locked.cli("RPUSH", "alist", "x")
        r = self.nx("-u", self.locked.url, "get", "alist")
        self.assertOneLineError(r, 65, "alist")

    def test_corrupt_record_is_65_and_untouched(self):
        self.assertEqual(self.nx("setnx", "victim", "precious").returncode, 0)
        records = []
        for root, _, files in os.walk(os.path.join(self.store_path, "data")):
            records += [os.path.join(root, f) for f in files if not f.startswith(".")]
        self.assertEqual(len(records), 1)
        with open(records[0], "r+b") as f:
            data = bytearray(f.read())
            data[-6] ^= 0xFF
            f.seek(0)
            f.write(data)
        before = open(records[0], "rb").read()
        for args in (["get", "victim"], ["setnx", "victim", "x"], ["getset", "victim", "x"],
                     ["del", "victim"], ["lock", "-n", "victim"]):
            with self.subTest(args=args):
                self.assertOneLineError(self.nx(*args), 65, records[0], "corrupt record (",
                                        "for key 'victim'; removing this file drops that key only")
                self.assertEqual(open(records[0], "rb").read(), before)

    def test_foreign_directory_is_65_and_untouched(self):
        os.makedirs(self.store_path)
        with open(os.path.join(self.store_path, "important.txt"), "w") as f:
            f.write("mine")
        self.assertOneLineError(self.nx("setnx", "k", "v"), 65, self.store_path)
        self.assertEqual(os.listdir(self.store_path), ["important.txt"])

    def test_out_of_range_count_names_its_bounds(self):
        r = self.nx("-u", "redis://127.0.0.1:1", "--replicas", "-1", "lock", "k")
        self.assertOneLineError(r, 64, "--replicas", "0 to 1000")
        self.assertLess(len(r.stderr), 200, r.stderr)

    def test_a_key_that_begins_with_a_dash_is_told_to_follow_double_dash(self):
        for args in (["lock", "-dash"], ["run-locked", "-n", "-dash", "true"], ["get", "-x"]):
            with self.subTest(args=args):
                self.assertOneLineError(self.nx(*args), 64, "goes after '--'",
                                        "nxlock %s [OPTIONS] -- %s" % (args[0], args[-2 if args[0] == "run-locked" else -1]))
        # A mistyped long option gets no such advice, and `--` works as said.
        self.assertNotIn(b"goes after", self.nx("lock", "--bogus", "k").stderr)
        self.assertEqual(self.nx("lock", "-n", "--", "-dash").returncode, 0)

    def test_ttl_and_hold_are_bounded_as_the_man_page_says(self):
        self.assertOneLineError(self.nx("lock", "-t", "1000001", "k"), 64, "--ttl", "1000000")
        self.assertOneLineError(self.nx("run-locked", "--hold", "1099511627776", "k", "true"), 64,
                                "--hold", "1000000")
        self.assertEqual(self.nx("lock", "-n", "-t", "1000000", "k").returncode, 0)

    def test_huge_key_is_cut_in_error_lines(self):
        key = "k" * 100_000
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.assertEqual(self.nx(*u, "setnx", key, "not a timestamp").returncode, 0)
                r = self.nx(*u, "lock", "-n", key)
                self.assertOneLineError(r, 65, "kkkk", "…")
                self.assertLess(len(r.stderr), 1000, "the whole key was printed")

    def test_unreadable_store_is_77(self):
        self.assertEqual(self.nx("setnx", "k", "v").returncode, 0)
        os.chmod(self.store_path, 0o700)
        # Permission bits do not bind root: ask as an unprivileged user instead.
        def drop():
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
        os.chmod(self.tmp, 0o755)
        # The checkout may sit in a directory only we can enter (mktemp -d, a
        # private home): the unprivileged user runs a copy from the temp dir.
        binary = os.path.join(self.tmp, "nxlock")
        shutil.copy(BIN, binary)
        r = subprocess.run([binary, "-u", "file://" + self.store_path, "get", "k"],
                           capture_output=True, preexec_fn=drop, timeout=30)
        self.assertOneLineError(r, 77, self.store_path)


class UnknownCommand(NxlockTestCase):
    """A word that is not a command is named, and the commands listed."""

    def test_unknown_command(self):
        for args in (["frob"], ["frob", "k"], ["-q", "frob"], ["--prefix", "p", "frob"]):
            with self.subTest(args=args):
                r = self.nx(*args)
                self.assertOneLineError(r, 64, "'frob'", "not an nxlock command", "run-locked",
                                        "nxlock --help")
        r = self.nx("--json", "frob")
        self.assertEqual(r.returncode, 64)
        self.assertEqual(json.loads(r.stdout)["exit_status"], 64)
        self.assertIn("frob", json.loads(r.stdout)["error"]["message"])


class Durations(NxlockTestCase):
    """Every duration is honoured or refused with 64 and a readable bound."""

    def test_out_of_range_durations_are_usage_errors(self):
        self.assertEqual(self.nx("lock", "-t", "60", "busy").returncode, 0)
        cases = []
        for value in ("1e308", "9.3e12", "1e13", "nan", "inf", "-1", "1000001"):
            cases += [["lock", "-w", value, "busy"],
                      ["run-locked", "--kill-after", value, "k", "true"],
                      ["--io-timeout", value, "get", "k"]]
        cases.append(["--io-timeout", "0.0000001", "get", "k"])
        cases.append(["--io-timeout", "0", "get", "k"])
        for args in cases:
            with self.subTest(args=args):
                r = self.nx(*args, timeout=10)
                self.assertOneLineError(r, 64, "--", "seconds")
                self.assertLess(len(r.stderr), 200)  # a readable bound, not 300 digits

    def test_silent_server_with_a_tiny_timeout_does_not_hang(self):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            url = "redis://127.0.0.1:%d" % listener.getsockname()[1]
            for timeout in ("0.0000001", "0.001"):
                with self.subTest(timeout=timeout):
                    r = self.nx("-u", url, "--io-timeout", timeout, "get", "k", timeout=10)
                    self.assertIn(r.returncode, (64, 69), r.stderr)

    def test_durations_in_range_are_honoured(self):
        self.assertEqual(self.nx("lock", "-t", "60", "busy").returncode, 0)
        start = time.monotonic()
        r = self.nx("lock", "-w", "0.5", "busy")
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertGreaterEqual(time.monotonic() - start, 0.5)
        self.assertEqual(self.nx("lock", "-w", "1000000", "free").returncode, 0)
        r = self.nx("--io-timeout", "1000000", "run-locked", "--kill-after", "1000000", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)


class ForceUnlockCorruptHolder(NxlockTestCase):
    """unlock --force releases even when the holder record is corrupt."""

    def test_corrupt_holder_record(self):
        self.assertEqual(self.nx("lock", "k").returncode, 0)
        stripe, name = bucket_of("{k}:holder:k")
        record = os.path.join(self.store_path, "data", stripe, name)
        with open(record, "r+b") as f:
            data = bytearray(f.read())
            data[-6] ^= 0xFF
            f.seek(0)
            f.write(data)
        r = self.nx("unlock", "--force", "k")
        self.assertEqual(r.returncode, 0, r.stderr)
        err = r.stderr.decode()
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("holder", err)
        self.assertIn(record, err)
        self.assertEqual(self.nx("get", "k").returncode, 1, "the lock is gone")
        r = self.nx("--json", "unlock", "--force", "k")
        self.assertEqual(r.returncode, 1)  # nothing left to delete


class PrivateCheckout(unittest.TestCase):
    """Tests that run nxlock as another user work from a mode-0700 checkout."""

    def test_unreadable_store_test_from_a_private_directory(self):
        private = tempfile.mkdtemp(prefix="nxlock-private-")
        self.addCleanup(shutil.rmtree, private, True)
        os.chmod(private, 0o700)
        binary = os.path.join(private, "nxlock")
        shutil.copy(BIN, binary)
        env = dict(os.environ, NXLOCK_BIN=binary)
        r = subprocess.run([sys.executable, "-m", "unittest",
                            "test_bad_input.BadInput.test_unreadable_store_is_77"],
                           cwd=os.path.dirname(os.path.abspath(__file__)), env=env,
                           capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace")[-2000:])


if __name__ == "__main__":
    unittest.main()
