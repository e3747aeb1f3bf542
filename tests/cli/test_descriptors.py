"""No descriptor of nxlock's reaches a child, and none sits on a closed stdin/stdout/stderr:
a socket or store file there would take the output meant for the terminal."""
import os
import subprocess
import sys
import unittest

from harness import BIN, NxlockTestCase

# The child lists its descriptors and where each leads.
LIST_FDS = ("import os\n"
            "for fd in sorted(os.listdir('/proc/self/fd'), key=int):\n"
            "    try: print(fd, os.readlink('/proc/self/fd/' + fd))\n"
            "    except OSError: pass\n")


class Descriptors(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def run_closing(self, closing, *args):
        """Runs nxlock with the shell redirection `closing` (e.g. '<&-') applied."""
        return subprocess.run(["sh", "-c", 'exec "$@" ' + closing, "sh", BIN, *args],
                              capture_output=True, env=self.env, timeout=30,
                              stdin=subprocess.DEVNULL)

    def child_descriptors(self, result):
        self.assertEqual(result.returncode, 0, result.stderr)
        found = {}
        for line in result.stdout.decode().splitlines():
            fd, target = line.split(" ", 1)
            found[int(fd)] = target
        return found

    def assertOnlyStandard(self, found, backend):
        # The one other descriptor allowed is the child's own listing of /proc/self/fd.
        extra = {fd: target for fd, target in found.items()
                 if fd > 2 and not target.startswith("/proc/")}
        self.assertEqual(extra, {}, "%s: the child inherited %s" % (backend.name, extra))
        for fd in (0, 1, 2):
            self.assertNotIn("socket:", found.get(fd, ""), backend.name)
            self.assertFalse(found.get(fd, "").startswith(self.store_path), backend.name)

    def test_child_inherits_no_descriptor(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                result = self.nx(*backend.args(), "run-locked", "fds", sys.executable, "-c",
                                 LIST_FDS)
                self.assertOnlyStandard(self.child_descriptors(result), backend)

    def test_child_inherits_no_descriptor_when_stdin_was_closed(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                result = self.run_closing("<&-", *backend.args(), "run-locked", "fds",
                                          sys.executable, "-c", LIST_FDS)
                found = self.child_descriptors(result)
                self.assertOnlyStandard(found, backend)
                self.assertEqual(found.get(0), "/dev/null", backend.name)

    def test_output_with_stdout_closed_goes_nowhere(self):
        # Were the Redis connection to land on fd 1, `get` would write the value into
        # it, and Redis would run it as an inline command.
        self.redis.cli("SET", "canary", "original")
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                db = backend.url.rsplit("/", 1)[-1] if backend.name == "redis" else None
                self.assertEqual(self.nx(*backend.args(), "setnx", "k",
                                         "SET canary overwritten").returncode, 0)
                result = self.run_closing(">&-", *backend.args(), "get", "k")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(self.redis.cli("GET", "canary").strip(), b"original")
                if db:
                    self.assertEqual(self.redis.cli("-n", db, "GET", "canary").strip(), b"")
                again = self.nx(*backend.args(), "get", "k")
                self.assertEqual(again.stdout, b"SET canary overwritten\n", backend.name)

    def test_errors_with_stderr_closed_go_nowhere(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                self.assertEqual(self.nx(*backend.args(), "setnx", "lockish", "data").returncode,
                                 0)
                result = self.run_closing("2>&-", *backend.args(), "lock", "-n", "lockish")
                self.assertEqual(result.returncode, 65)
                again = self.nx(*backend.args(), "get", "lockish")
                self.assertEqual(again.stdout, b"data\n", backend.name)


if __name__ == "__main__":
    unittest.main()
