"""A flock(1) user's habits: -s, -x, -c, and --timeout, which flock means as the
wait; and the defaults a fleet sets once in the environment (NXLOCK_TTL,
NXLOCK_WAIT), which the command line overrides."""
import json
import os
import subprocess
import time

from harness import BIN, NxlockTestCase, read, wait_for

# The re-exec form, as the README and the man page show it: a script that runs
# whole under its lock. The log shows whether two runs overlapped; a process the
# script leaves behind says whether it, too, passes the test for "inside".
REEXEC_SCRIPT = """#!/bin/sh
[ "$NXLOCK_JOB_PID" = $$ ] || exec "$NXLOCK_UNDER_TEST" -u "$URL" run-locked -w 30 deploy "$0" "$@"
echo "start $1" >> "$LOG"
sh -c '[ "$NXLOCK_JOB_PID" = $$ ] && echo "inside $0" || echo "outside $0"' "$1" >> "$LOG"
sleep 0.3
echo "end $1" >> "$LOG"
"""


class FlockOptions(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_s_is_shared_and_x_exclusive(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                first = self.nx(*u, "lock", "-s", "-t", "60", "sk")
                self.assertEqual(first.returncode, 0, first.stderr)
                # A second shared holder is let in; an exclusive taker is not.
                r = self.nx(*u, "run-locked", "-s", "-n", "sk", "true")
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.nx(*u, "run-locked", "-x", "-n", "sk", "true")
                self.assertEqual(r.returncode, 75, r.stderr)
                r = self.nx(*u, "lock", "--exclusive", "-n", "sk")
                self.assertEqual(r.returncode, 75, r.stderr)
                # -x is the default, accepted: an exclusive lock as without it.
                r = self.nx(*u, "lock", "-x", "-t", "60", "xk")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.nx(*u, "lock", "-s", "-n", "xk").returncode, 75)
                self.assertOneLineError(self.nx(*u, "lock", "-s", "-x", "zk"), 64, "excludes")

    def test_a_script_reexecuted_under_its_lock_never_overlaps_itself(self):
        script = os.path.join(self.tmp, "deploy.sh")
        with open(script, "w") as f:
            f.write(REEXEC_SCRIPT)
        os.chmod(script, 0o755)
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = os.path.join(self.tmp, "log-" + backend.name)
                env = dict(self.env, NXLOCK_UNDER_TEST=BIN, URL=backend.url, LOG=log)
                runs = [subprocess.Popen([script, str(i)], env=env, stderr=subprocess.PIPE)
                        for i in range(3)]
                for run in runs:
                    _, err = run.communicate(timeout=60)
                    self.assertEqual(run.returncode, 0, err)
                lines = [line.split() for line in read(log).splitlines()]
                self.assertEqual(len(lines), 9, lines)
                # Each run whole, one after the other: start N, outside N, end N...
                for first in range(0, 9, 3):
                    start, inside, end = lines[first:first + 3]
                    self.assertEqual(start[0], "start", lines)
                    self.assertEqual(end, ["end", start[1]], lines)
                    # ...where a child of the job inherited NXLOCK_JOB_PID, but is not the job.
                    self.assertEqual(inside, ["outside", start[1]], lines)

    def test_c_runs_a_shell_string_before_or_after_the_key(self):
        script = "echo hi; echo there"
        for argv in (["run-locked", "-c", script, "k"], ["run-locked", "k", "-c", script],
                     ["run-locked", "-n", "--command", script, "k"],
                     ["run-locked", "-n", "--command=" + script, "k"]):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertEqual((r.returncode, r.stdout), (0, b"hi\nthere\n"), r.stderr)
        r = self.nx("run-locked", "k", "-c", "exit 7")
        self.assertEqual(r.returncode, 7, r.stderr)

    def test_no_shell_without_c(self):
        # The string is one program's name, as before: not found, 127.
        r = self.nx("run-locked", "k", "echo hi; echo there")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertEqual(r.stdout, b"")
        # After `--`, -c is the child's own word.
        r = self.nx("run-locked", "k", "--", "-c", "x")
        self.assertEqual(r.returncode, 127, r.stderr)

    def test_c_misuse_is_a_usage_error(self):
        for argv in (["run-locked", "k", "-c"], ["run-locked", "k", "-c", "echo", "hi"],
                     ["run-locked", "-c", "echo hi", "k", "echo", "there"],
                     ["run-locked", "-c", "", "k"]):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertOneLineError(r, 64)
                self.assertEqual(r.stdout, b"")

    def test_an_empty_command_is_refused_before_the_lock_is_taken(self):
        # `run-locked KEY "$CMD"` with CMD unset: 64, as `-c ''` is, never
        # "nxlock: : command not found" (127) once the lock was taken.
        self.assertEqual(self.nx("lock", "-t", "60", "held").returncode, 0)
        for backend in self.backends():
            for tail in ([""], ["--", ""], ["-c", ""], ["", "arg"]):
                for key in ("kk", "held"):
                    with self.subTest(backend=backend.name, tail=tail, key=key):
                        u = backend.args()
                        r = self.nx(*u, "run-locked", "-n", key, *tail)
                        self.assertOneLineError(r, 64, "empty", "an unset variable in a script?")
                        self.assertNotIn("command not found", r.stderr.decode())
                        self.assertEqual(r.stdout, b"")
                self.assertEqual(self.nx(*u, "status", "kk").returncode, 1)  # never taken

    def test_flock_options_that_cannot_map_are_refused_with_advice(self):
        # Man page, run-locked: "-o is refused: drop it"; -F has no counterpart.
        marker = os.path.join(self.tmp, "ran")
        for argv, said in ((["run-locked", "-o", "mylock"], "flock's -o is refused: drop it"),
                           (["run-locked", "-n", "--close", "mylock"], "flock's --close is refused: drop it"),
                           (["run-locked", "-F", "mylock"], "flock's -F (no fork) is refused: drop it"),
                           (["run-locked", "-w", "1", "--no-fork", "mylock"], "flock's --no-fork"),
                           (["-o", "run-locked", "mylock"], "flock's -o is refused")):
            with self.subTest(argv=argv):
                r = self.nx(*argv, "touch", marker)
                self.assertOneLineError(r, 64, said)
                err = r.stderr.decode()
                for wrong in ("goes after '--'", "did you mean --clock", "not expected"):
                    self.assertNotIn(wrong, err)
                self.assertFalse(os.path.exists(marker))
        self.assertOneLineError(self.nx("lock", "-o", "k"), 64, "flock's -o is refused")
        self.assertEqual(self.nx("status", "mylock").returncode, 1)  # never taken

    def test_flock_descriptor_and_file_forms_point_at_run_locked(self):
        for argv, form in ((["9"], "descriptor form"), (["-n", "9"], "descriptor form"),
                           (["-x", "9"], "descriptor form"),
                           (["/path/f.lock", "-c", "echo hi"], "file form"),
                           (["-n", "./f.lock", "true"], "file form"), (["f.lock", "true"], "file form")):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertOneLineError(r, 64, "is not an nxlock command: flock's " + form,
                                        "nxlock run-locked KEY COMMAND")
        self.assertIn("EXAMPLES", self.nx("9").stderr.decode())  # the re-run form

    def test_timeout_after_lock_or_run_locked_asks_for_w(self):
        for argv in (["lock", "--timeout", "1", "k"], ["run-locked", "--timeout", "1", "k", "true"],
                     ["run-locked", "--timeout=1", "k", "true"], ["lock", "-n", "--timeout", "1", "k"]):
            with self.subTest(argv=argv):
                self.assertOneLineError(self.nx(*argv), 64, "--timeout", "did you mean -w?")
        # Nothing was taken.
        self.assertEqual(self.nx("lock", "-n", "k").returncode, 0)

    def test_timeout_before_the_command_is_a_deprecated_io_timeout(self):
        for argv in (["--timeout", "3", "setnx", "k", "v"], ["-q", "--timeout=3", "get", "k"],
                     ["get", "--timeout", "3", "k"]):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertEqual(r.returncode, 0, r.stderr)
                err = r.stderr.decode()
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn("--timeout is deprecated", err)
                self.assertIn("--io-timeout", err)
        r = self.nx("--io-timeout", "3", "get", "k")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"v\n", b""))
        self.assertOneLineError(self.nx("--io-timeout", "0", "get", "k"), 64, "--io-timeout")
        # It is the backend's timeout: a silent server is given up on within it.
        r = self.nx("-u", "redis://127.0.0.1:1", "--timeout", "0.5", "get", "k")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("deprecated", r.stderr.decode())


class EnvironmentDefaults(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def env_with(self, **variables):
        return dict(self.env, **variables)

    def ttl_of(self, backend, key, env=None):
        out = self.nx(*backend.args(), "--json", "status", key, env=env).stdout
        return json.loads(out)["seconds_left"]

    def test_nxlock_ttl(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                u = backend.args()
                env = self.env_with(NXLOCK_TTL="500")
                r = self.nx(*u, "lock", "a", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreater(self.ttl_of(backend, "a"), 400)
                # The command line wins.
                r = self.nx(*u, "lock", "-t", "30", "b", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertLessEqual(self.ttl_of(backend, "b"), 40)
                value = r.stdout.decode().strip()
                r = self.nx(*u, "renew", "b", value, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreater(self.ttl_of(backend, "b"), 400)

    def test_nxlock_wait(self):
        self.assertEqual(self.nx("lock", "-t", "60", "held").returncode, 0)
        env = self.env_with(NXLOCK_WAIT="0.5")
        start = time.monotonic()
        r = self.nx("lock", "held", env=env)
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertGreaterEqual(time.monotonic() - start, 0.5)
        # -n and -w on the command line win, and -n is not "-n and -w".
        r = self.nx("lock", "-n", "held", env=env)
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertNotIn(b"excludes", r.stderr)
        r = self.nx("run-locked", "-n", "free", "true", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        start = time.monotonic()
        r = self.nx("lock", "-w", "0", "held", env=env)
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertLess(time.monotonic() - start, 0.5)

    def test_bad_values_name_the_variable(self):
        for name, value, argv in (("NXLOCK_TTL", "1.5", ["lock", "k"]),
                                  ("NXLOCK_TTL", "abc", ["run-locked", "k", "true"]),
                                  ("NXLOCK_TTL", "0", ["renew", "k", "1"]),
                                  ("NXLOCK_WAIT", "soon", ["lock", "k"]),
                                  ("NXLOCK_WAIT", "-1", ["run-locked", "k", "true"])):
            with self.subTest(name=name, value=value):
                r = self.nx(*argv, env=self.env_with(**{name: value}))
                self.assertOneLineError(r, 64, name, value)
        # Commands that take neither do not read them.
        r = self.nx("setnx", "k", "v", env=self.env_with(NXLOCK_TTL="abc", NXLOCK_WAIT="x"))
        self.assertEqual(r.returncode, 0, r.stderr)
