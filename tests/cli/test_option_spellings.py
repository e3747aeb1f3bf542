"""Every option in every spelling and position: before or after the command
name, with its value in the next word or after '=', short flags clustered, set
from its environment variable, and run-locked's child command line left
untouched after KEY."""
import os

from harness import NxlockTestCase


class OptionSpellings(NxlockTestCase):
    def test_backend_options_after_the_command_are_still_options(self):
        r = self.nx("get", "--replicas", "x", "k")
        self.assertOneLineError(r, 64, "--replicas")
        r = self.nx("get", "--cert", os.path.join(self.tmp, "c.pem"), "k")
        self.assertOneLineError(r, 64, "--key")

    def test_every_spelling_of_the_global_options(self):
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

    def test_child_command_line_is_passed_untouched(self):
        # After KEY (and one `--`), every word is the child's: nxlock's own
        # option names and command names included.
        script = 'printf "%s|" "$@"'
        for argv, out in (
                (["run-locked", "-n", "k", "sh", "-c", script, "x", "--help", "-u", "u", "--json"],
                 b"--help|-u|u|--json|"),
                (["run-locked", "k", "--", "sh", "-c", script, "x", "--", "-n"], b"--|-n|"),
                (["run-locked", "run-locked", "sh", "-c", script, "x", "run-locked"],
                 b"run-locked|")):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertEqual((r.returncode, r.stdout), (0, out), r.stderr)

    def test_operands_that_are_command_names(self):
        self.assertEqual(self.nx("setnx", "setnx", "get").returncode, 0)
        r = self.nx("get", "setnx")
        self.assertEqual((r.returncode, r.stdout), (0, b"get\n"), r.stderr)

    def test_url_from_the_environment(self):
        # NXLOCK_URL stands in for an absent -u; an empty one is refused, not
        # the per-host store (test_url_refusals.py).
        url = "file://" + os.path.join(self.tmp, "other")
        self.assertEqual(self.nx("-u", url, "setnx", "k", "there").returncode, 0)
        r = self.nx("get", "k", env=dict(self.env, NXLOCK_URL=url))
        self.assertEqual((r.returncode, r.stdout), (0, b"there\n"), r.stderr)
        r = self.nx("get", "k", env=dict(self.env, NXLOCK_URL=""))
        self.assertOneLineError(r, 64, "NXLOCK_URL")
        # -u wins over the environment.
        r = self.nx("-u", url, "get", "k", env=dict(self.env, NXLOCK_URL="redis://127.0.0.1:1"))
        self.assertEqual((r.returncode, r.stdout), (0, b"there\n"), r.stderr)
