"""setnx/get/getset/del through the binary, on the embedded store and on Redis."""
import json
import os
import unittest

from harness import NxlockTestCase

AWKWARD_VALUES = [
    b"plain", b"with space", "ünïcødé ✓".encode(), b"line1\nline2", b"trailing\n",
    b"-leading-dash", b"--", b"*", b"$HOME", b"tab\tsep", b"x" * 50000, b"",
]


class KeyValue(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_setnx_get_getset_del(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                r = self.nx(*u, "setnx", "k", "v1")
                self.assertEqual((r.returncode, r.stdout), (0, b"1\n"))
                r = self.nx(*u, "setnx", "k", "v2")
                self.assertEqual((r.returncode, r.stdout), (1, b"0\n"))
                r = self.nx(*u, "get", "k")
                self.assertEqual((r.returncode, r.stdout), (0, b"v1\n"))
                r = self.nx(*u, "getset", "k", "v3")
                self.assertEqual((r.returncode, r.stdout), (0, b"v1\n"))
                r = self.nx(*u, "getset", "fresh", "x")
                self.assertEqual((r.returncode, r.stdout), (1, b""))
                self.assertEqual(self.nx(*u, "get", "fresh").stdout, b"x\n")
                r = self.nx(*u, "del", "k", "fresh", "never")
                self.assertEqual((r.returncode, r.stdout), (0, b"2\n"))
                r = self.nx(*u, "del", "k")
                self.assertEqual((r.returncode, r.stdout), (1, b"0\n"))
                r = self.nx(*u, "get", "k")
                self.assertEqual((r.returncode, r.stdout, r.stderr), (1, b"", b""))

    def test_binary_safe_values_and_keys(self):
        for backend in self.backends():
            for i, value in enumerate(AWKWARD_VALUES):
                key = b"key " + value[:40] + str(i).encode()
                with self.subTest(backend=backend.name, value=value[:20]):
                    r = self.nx(*backend.args(), "setnx", "--", key, value)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    r = self.nx(*backend.args(), "get", "--", key)
                    self.assertEqual(r.stdout, value + b"\n")

    def test_leading_dash_after_double_dash(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                self.assertEqual(self.nx(*backend.args(), "setnx", "--", "-k", "-1").returncode, 0)
                self.assertEqual(self.nx(*backend.args(), "get", "--", "-k").stdout, b"-1\n")

    def test_prefix_and_env_url(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                env = dict(self.env, NXLOCK_URL=backend.url, NXLOCK_PREFIX="app:")
                self.assertEqual(self.nx("setnx", "k", "v", env=env).returncode, 0)
                self.assertEqual(self.nx(*backend.args(), "get", "app:k").stdout, b"v\n")
                self.assertEqual(self.nx(*backend.args(), "--prefix", "app:", "get", "k").stdout,
                                 b"v\n")

    def test_default_store_is_private(self):
        os.environ.pop("NXLOCK_URL", None)
        self.assertEqual(self.nx("setnx", "k", "v").returncode, 0)
        mode = os.stat(self.store_path).st_mode & 0o777
        self.assertEqual(mode, 0o700)
        self.assertEqual(self.nx("get", "k").stdout, b"v\n")

    def test_json_output(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                out = json.loads(self.nx(*u, "--json", "setnx", "k", "v").stdout)
                self.assertEqual((out["set"], out["exit_status"]), (True, 0))
                out = json.loads(self.nx(*u, "get", "k", "--json").stdout)
                self.assertEqual((out["found"], out["value"]), (True, "v"))
                out = json.loads(self.nx(*u, "--json", "getset", "k", "w").stdout)
                self.assertEqual(out["old_value"], "v")
                out = json.loads(self.nx(*u, "--json", "del", "k").stdout)
                self.assertEqual(out["removed"], 1)
                out = json.loads(self.nx(*u, "--json", "get", "").stdout)
                self.assertEqual(out["exit_status"], 64)
                self.assertIn("error", out)

    def test_verbose_traces_and_quiet(self):
        r = self.nx("-v", "lock", "-n", "t")
        self.assertIn(b"SETNX", r.stderr)
        r = self.nx("-q", "lock", "-n", "t")
        self.assertEqual((r.returncode, r.stderr), (75, b""))


if __name__ == "__main__":
    unittest.main()
