"""Options other than -u (the global ones, -E and --clock) are built only
when argv or the environment may name them (src/cli/lazy_options.cpp, may_name):
every other command line must get the same outcome, word for word, as with all
options built. An empty NXLOCK_CACERT forces them all to be built and is
otherwise ignored (CLI11 takes no empty environment value), so each command
line below runs both ways, each in a store of its own, and the two must agree.
A set option variable also turns the fast path off (src/cli/fast_path.cpp), so
the plain command lines among them compare it with CLI11 as well."""
import os

from harness import NxlockTestCase

# Each is run in order in a fresh embedded store; together they cover success,
# every kind of usage error CLI11 reports, and the global options after the
# command name (they fall through to the app).
COMMAND_LINES = [
    ["setnx", "k", "v"],
    ["setnx", "k", "w"],
    ["get", "k"],
    ["--json", "get", "k"],
    ["get", "--json", "k"],
    ["-q", "get", "missing"],
    ["--prefix", "p:", "setnx", "k", "v"],
    ["get", "--prefix=p:", "k"],
    ["del", "k", "p:k"],
    ["getset", "k", "x"],
    ["status", "k"],
    ["run-locked", "-n", "g", "true"],
    ["run-locked", "-n", "g", "--", "sh", "-c", "exit 3"],
    ["--timeout", "0", "get", "k"],
    ["--timeout", "nan", "get", "k"],
    ["-u"],
    ["-u", "bogus://x", "get", "k"],
    ["get"],
    ["get", "k", "extra"],
    ["setnx", "k"],
    ["--no-such-option", "get", "k"],
    ["get", "--no-such-option", "k"],
    ["-z", "get", "k"],
    ["-q", "-v", "get", "k"],
    ["-qv", "get", "k"],
    ["get", "-vq", "k"],
    ["-v", "get", "k"],
    ["get", "k", "--json"],
    ["--timeout=abc", "get", "k"],
    ["--timeout", "5", "get", "k"],
    ["--password-file", "/nonexistent/pw", "-u", "redis://127.0.0.1:1", "get", "k"],
    ["--prefix"],
    ["lock", "-n", "-w", "1", "k"],
    ["lock", "-t", "0", "k"],
    ["lock", "-E", "300", "k"],
    ["lock", "-n", "-w", "1", "-E", "x", "k"],
    ["lock", "--clock", "nope", "k"],
    ["status", "--clock=local", "k"],
    ["unlock", "--clock", "local", "k", "v"],
    ["nosuchcommand"],
    [],
    ["--version"],
    # The fast path's command lines (and near misses, which CLI11 parses).
    ["getset", "k", "y w"],
    ["setnx", "k", "v"],
    ["-u", "bogus://x", "setnx", "k", "v"],
    ["run-locked", "g", "true"],
    ["run-locked", "--nonblock", "g", "sh", "-c", "exit 4"],
    ["run-locked", "-n", "g", "--", "false"],
    ["run-locked", "-n", "g", "/nonexistent/command"],
    ["run-locked", "-n", "g"],
    ["run-locked", "-n", "g", "--"],
    ["setnx", "", "v"],
    ["get", "-"],
]


class LazyOptions(NxlockTestCase):
    def run_all(self, store, env_extra):
        env = dict(self.env)
        env.pop("NXLOCK_CACERT", None)
        env.update(env_extra)
        env["NXLOCK_STORE"] = os.path.join(self.tmp, store)
        return [self.nx(*argv, env=env) for argv in COMMAND_LINES]

    def test_same_outcome_with_and_without_the_backend_options(self):
        lazy = self.run_all("lazy", {})
        full = self.run_all("full", {"NXLOCK_CACERT": ""})
        for argv, a, b in zip(COMMAND_LINES, lazy, full):
            with self.subTest(argv=argv):
                self.assertEqual((a.returncode, a.stdout, a.stderr),
                                 (b.returncode, b.stdout, b.stderr))
        # The list exercises both outcomes, not only errors.
        self.assertIn(0, [r.returncode for r in lazy])
        self.assertIn(64, [r.returncode for r in lazy])

    def test_backend_options_after_the_command_are_still_options(self):
        # Not built on the plain path, they must be as soon as argv names them.
        r = self.nx("get", "--replicas", "x", "k")
        self.assertOneLineError(r, 64, "--replicas")
        r = self.nx("get", "--cert", os.path.join(self.tmp, "c.pem"), "k")
        self.assertOneLineError(r, 64, "--key")

    def test_every_spelling_of_the_global_options(self):
        # The comparison above builds only the backend options both ways: the
        # others are checked against what they must do, in each spelling.
        self.assertEqual(self.nx("setnx", "k", "v").returncode, 0)
        self.assertEqual(self.nx("lock", "-t", "60", "held").returncode, 0)
        for argv in (["-qv", "get", "k"], ["get", "-vq", "k"], ["--quiet", "--verbose", "get", "k"]):
            with self.subTest(argv=argv):
                self.assertOneLineError(self.nx(*argv), 64, "--quiet excludes --verbose")
        for argv in (["-v", "get", "k"], ["get", "-v", "k"], ["--verbose", "get", "k"]):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertEqual((r.returncode, r.stdout), (0, b"v\n"), r.stderr)
                self.assertIn("nxlock: GET k → v", r.stderr.decode())
        for argv in (["lock", "-n", "held"], ["-q", "lock", "-n", "held"], ["lock", "-nq", "held"],
                     ["lock", "--quiet", "-n", "held"]):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertEqual(r.stderr == b"", "q" in "".join(argv[:-1]), r.stderr)
        for argv in (["--timeout=abc", "get", "k"], ["get", "--timeout", "abc", "k"]):
            with self.subTest(argv=argv):
                self.assertOneLineError(self.nx(*argv), 64, "--timeout: 'abc'")
        for argv in (["get", "k", "--json"], ["--json", "get", "k"]):
            with self.subTest(argv=argv):
                self.assertEqual(self.nx(*argv).stdout,
                                 b'{"exit_status":0,"found":true,"key":"k","value":"v"}\n')
        self.assertEqual(self.nx("--prefix=p:", "setnx", "k", "w").returncode, 0)
        self.assertEqual(self.nx("get", "--prefix", "p:", "k").stdout, b"w\n")
        r = self.nx("get", "-u", "redis://127.0.0.1:1", "--password-file", "/nonexistent/pw", "k")
        self.assertOneLineError(r, 64, "password file '/nonexistent/pw'")

    def test_run_locked_options_in_every_spelling(self):
        for option in ("--on-lost=bogus", "--kill-after=x", "--hold=abc"):
            with self.subTest(option=option):
                r = self.nx("run-locked", option, "-n", "k", "true")
                self.assertOneLineError(r, 64, option.split("=")[0])
        for option in ("--on-lost", "--kill-after", "--hold"):
            with self.subTest(option=option):
                r = self.nx("run-locked", "-n", option, "x", "k", "true")
                self.assertOneLineError(r, 64, option)
        self.assertEqual(self.nx("run-locked", "--no-renew", "-n", "k", "true").returncode, 0)
        env = dict(self.env, NXLOCK_PASSWORD="s3cret")
        script = 'echo "$NXLOCK_PASSWORD"'
        r = self.nx("run-locked", "--inherit-credentials", "-n", "k", "sh", "-c", script, env=env)
        self.assertEqual((r.returncode, r.stdout), (0, b"s3cret\n"), r.stderr)
        r = self.nx("run-locked", "-n", "k", "sh", "-c", script, env=env)
        self.assertEqual((r.returncode, r.stdout), (0, b"\n"), r.stderr)

    def test_prefix_from_the_environment_alone(self):
        env = dict(self.env, NXLOCK_PREFIX="p:")
        self.assertEqual(self.nx("setnx", "k", "v", env=env).returncode, 0)
        r = self.nx("get", "p:k")
        self.assertEqual((r.returncode, r.stdout), (0, b"v\n"), r.stderr)

    def test_conflict_exit_code_in_every_spelling(self):
        self.assertEqual(self.nx("lock", "-t", "60", "held").returncode, 0)
        for argv, status in ((["-E", "3"], 3), (["--conflict-exit-code=4"], 4), (["-nE5"], 5),
                             (["--conflict-exit-code", "6"], 6)):
            with self.subTest(argv=argv):
                r = self.nx("lock", "-n", *argv, "held")
                self.assertEqual(r.returncode, status, r.stderr)
