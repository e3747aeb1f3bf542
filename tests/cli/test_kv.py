"""setnx/get/getset/del through the binary, on every backend that offers them (harness.backends)."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase

NOBODY = 65534


def step_of(strace_line):
    """One line of `strace -y` as a step of a store write, or None."""
    call = re.search(r"(\w+)\((\d+)<([^>]*)>", strace_line)
    if not call:
        return None
    name, path = call.group(1), call.group(3)
    if name in ("fsync", "fdatasync"):
        return "sync record" if path.endswith(".tmp") else "sync directory"
    if name.startswith("rename"):
        return "rename"
    if name.startswith("unlink"):
        return "unlink"
    return None

AWKWARD_VALUES = [
    b"plain", b"with space", "ünïcødé ✓".encode(), b"line1\nline2", b"trailing\n",
    b"-leading-dash", b"--", b"*", b"$HOME", b"tab\tsep", b"x" * 50000, b"",
]


class KeyValue(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_setnx_get_getset_del(self):
        for backend in self.backends(offering="kv"):
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
        for backend in self.backends(offering="kv"):
            for i, value in enumerate(AWKWARD_VALUES):
                key = b"key " + value[:40] + str(i).encode()
                with self.subTest(backend=backend.name, value=value[:20]):
                    r = self.nx(*backend.args(), "setnx", "--", key, value)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    r = self.nx(*backend.args(), "get", "--", key)
                    self.assertEqual(r.stdout, value + b"\n")

    def test_leading_dash_after_double_dash(self):
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                self.assertEqual(self.nx(*backend.args(), "setnx", "--", "-k", "-1").returncode, 0)
                self.assertEqual(self.nx(*backend.args(), "get", "--", "-k").stdout, b"-1\n")

    def test_prefix_and_env_url(self):
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                env = dict(self.env, NXLOCK_URL=backend.url, NXLOCK_PREFIX="app:")
                self.assertEqual(self.nx("setnx", "k", "v", env=env).returncode, 0)
                self.assertEqual(self.nx(*backend.args(), "get", "app:k").stdout, b"v\n")
                self.assertEqual(self.nx(*backend.args(), "--prefix", "app:", "get", "k").stdout,
                                 b"v\n")

    def test_default_store_is_private(self):
        # The real default: no URL and no NXLOCK_STORE, a private HOME and
        # XDG_STATE_HOME. Root's default is /var/lib/nxlock, so a root test run
        # checks the per-user default as nobody, in a home that nobody owns.
        home = tempfile.mkdtemp(prefix="nxlock-home-")
        self.addCleanup(shutil.rmtree, home, ignore_errors=True)
        preexec = None
        binary = BIN
        if os.geteuid() == 0:
            os.chown(home, NOBODY, NOBODY)
            # The checkout may sit in a private (0700) directory that nobody
            # cannot enter: nobody runs a copy from its own home instead.
            binary = os.path.join(home, "nxlock")
            shutil.copy(BIN, binary)

            def preexec():
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
        env = dict(self.env, HOME=home)
        del env["NXLOCK_STORE"]
        cases = [
            ("XDG_STATE_HOME", dict(env, XDG_STATE_HOME=os.path.join(home, "state")),
             os.path.join(home, "state", "nxlock")),
            ("HOME", {k: v for k, v in env.items() if k != "XDG_STATE_HOME"},
             os.path.join(home, ".local", "state", "nxlock")),
        ]
        for name, case_env, path in cases:
            with self.subTest(default_from=name):
                def nx(*args):
                    return subprocess.run([binary, *args], env=case_env, capture_output=True,
                                          preexec_fn=preexec, timeout=COMMAND_TIMEOUT)
                r = nx("setnx", name, "v")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(os.path.isdir(path), "no store at " + path)
                info = os.stat(path)
                self.assertEqual(info.st_mode & 0o777, 0o700, path)
                self.assertEqual(info.st_uid, NOBODY if preexec else os.geteuid())
                self.assertEqual(nx("get", name).stdout, b"v\n")
                self.assertEqual(nx("-u", "file://" + path, "get", name).stdout, b"v\n")
        self.assertFalse(os.path.exists(self.store_path), "NXLOCK_STORE was not used")

    def test_sync_1_syncs_each_write_before_it_is_reported(self):
        # What ?sync=1 promises (docs/STORE-FORMAT.md): each record is fsynced
        # before the rename that commits it, and the stripe directory after the
        # rename or unlink; without it nothing is synced. Seen with strace -y,
        # which names the file or directory behind every descriptor.
        calls = "fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat"
        # An ASan build's leak check cannot run under ptrace.
        env = dict(self.env, ASAN_OPTIONS=":".join(filter(None, [
            self.env.get("ASAN_OPTIONS"), "detect_leaks=0"])))
        # The store, its data directory and the key's stripe exist from here on
        # (creating them syncs more: the marker, and the parent of each directory).
        plain = "file://" + self.store_path
        self.assertEqual(self.nx("-u", plain, "setnx", "k", "x").returncode, 0)
        self.assertEqual(self.nx("-u", plain, "del", "k").returncode, 0)
        for durable in (True, False):
            url = "file://" + self.store_path + ("?sync=1" if durable else "")
            for command, expected in ((["setnx", "k", "v"], b"1\n"),
                                      (["getset", "k", "w"], b"v\n"),
                                      (["del", "k"], b"1\n")):
                with self.subTest(durable=durable, command=command[0]):
                    log = os.path.join(self.tmp, "strace.log")
                    r = subprocess.run(["strace", "-f", "-y", "-qq", "-o", log, "-e",
                                        "trace=" + calls, BIN, "-u", url, *command],
                                       env=env, capture_output=True,
                                       timeout=COMMAND_TIMEOUT)
                    self.assertEqual((r.returncode, r.stdout), (0, expected), r.stderr)
                    with open(log) as f:
                        steps = [step_of(line) for line in f if "(" in line]
                    steps = [s for s in steps if s]
                    commit = "unlink" if command[0] == "del" else "rename"
                    if not durable:
                        self.assertEqual(steps, [commit])
                    elif commit == "rename":
                        self.assertEqual(steps, ["sync record", "rename", "sync directory"])
                    else:
                        self.assertEqual(steps, ["unlink", "sync directory"])
        self.assertEqual(self.nx("-u", plain, "get", "k").returncode, 1)

    def test_json_output(self):
        for backend in self.backends(offering="kv"):
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
