"""--json: every command prints exactly one JSON object with the fields the man page documents."""
import json
import os
import signal
import subprocess
import time
import unittest

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase, wait_for


class Json(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def js(self, *args, status):
        """Runs nxlock --json; asserts the exit status and one JSON object on one line."""
        r = self.nx("--json", *args)
        self.assertEqual(r.returncode, status, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1, r.stdout)
        out = json.loads(lines[0])
        self.assertIsInstance(out, dict)
        self.assertEqual(out["exit_status"], status)
        return out

    def test_key_value_commands(self):
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.assertEqual(self.js(*u, "setnx", "k", "v", status=0),
                                 {"key": "k", "set": True, "exit_status": 0})
                self.assertFalse(self.js(*u, "setnx", "k", "w", status=1)["set"])
                self.assertEqual(self.js(*u, "get", "k", status=0),
                                 {"key": "k", "found": True, "value": "v", "exit_status": 0})
                self.assertEqual(self.js(*u, "get", "nope", status=1),
                                 {"key": "nope", "found": False, "exit_status": 1})
                out = self.js(*u, "getset", "k", "w", status=0)
                self.assertEqual((out["found"], out["old_value"]), (True, "v"))
                out = self.js(*u, "getset", "fresh", "x", status=1)
                self.assertEqual(out["found"], False)
                self.assertNotIn("old_value", out)
                self.assertEqual(self.js(*u, "del", "k", "fresh", "nope", status=0)["removed"], 2)
                self.assertEqual(self.js(*u, "del", "k", status=1)["removed"], 0)

    def test_bytes_that_are_not_utf8_come_as_hex(self):
        self.assertEqual(self.nx("setnx", "bin", b"\xffz").returncode, 0)
        out = self.js("get", "bin", status=0)
        self.assertEqual(out["value_hex"], "ff7a")
        self.assertNotIn("value", out)

    def test_lock_commands(self):
        # The value is the page's bare timestamp (expires_at == int(value)). Not on a
        # quorum: a shell's renew goes by the value alone there (man page, QUORUM OVER
        # INDEPENDENT SERVERS), and a stale value's renewal in the second of the last
        # one finds the value it would write already there, which it takes as done.
        for backend in [b for b in self.backends(offering="timestamp") if b.name != "quorum"]:
            with self.subTest(backend=backend.name):
                u = backend.args()
                out = self.js(*u, "lock", "-t", "30", "job", status=0)
                self.assertEqual((out["key"], out["acquired"]), ("job", True))
                value = out["value"]
                self.assertEqual(out["expires_at"], int(value))

                busy = self.js(*u, "lock", "-n", "job", status=75)
                self.assertEqual(busy["acquired"], False)
                self.assertEqual(busy["held_until"], int(value))
                self.assertTrue(0 <= busy["seconds_left"] <= 32, busy)
                # `lock` outlives no one: its holder is the script that called it (us).
                self.assertEqual(busy["holder"]["pid"], os.getpid())

                status = self.js(*u, "status", "job", status=0)
                self.assertEqual((status["state"], status["held"], status["value"]),
                                 ("held", True, value))
                self.assertEqual(status["expires_at"], int(value))
                self.assertIsInstance(status["now"], int)
                self.assertIsInstance(status["seconds_left"], int)

                renewed = self.js(*u, "renew", "-t", "60", "job", value, status=0)
                self.assertEqual(renewed["renewed"], True)
                self.assertGreater(int(renewed["value"]), int(value))
                self.assertEqual(renewed["expires_at"], int(renewed["value"]))
                stale = self.js(*u, "renew", "job", value, status=1)
                # The lock is held, by the renewed value: this one is not the holder's.
                self.assertEqual((stale["renewed"], stale["reason"]), (False, "held_by_other"))

                out = self.js(*u, "unlock", "job", value, status=1)
                self.assertEqual((out["released"], out["reason"]), (False, "held_by_other"))
                out = self.js(*u, "unlock", "job", renewed["value"], status=0)
                self.assertEqual(out["released"], True)
                self.assertNotIn("reason", out)
                out = self.js(*u, "unlock", "job", renewed["value"], status=1)
                self.assertEqual(out["reason"], "absent")
                out = self.js(*u, "unlock", "--force", "job", status=1)
                self.assertEqual((out["released"], out["reason"]), (False, "absent"))

                free = self.js(*u, "status", "job", status=1)
                self.assertEqual((free["state"], free["held"]), ("free", False))
                self.assertNotIn("value", free)

    def test_run_locked(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                out = self.js(*u, "run-locked", "job", "sh", "-c", "exit 3", status=3)
                self.assertEqual((out["acquired"], out["lost"], out["child_status"]),
                                 (True, False, 3))
                # The child's own stdout is not ours: it must not break the one object.
                r = self.nx(*u, "--json", "run-locked", "job", "true")
                self.assertEqual(json.loads(r.stdout)["child_status"], 0)

                out = self.js(*u, "run-locked", "job", "no-such-command-nxlock", status=127)
                self.assertNotIn("child_status", out)
                self.assertIn("not found", out["error"]["message"])

                self.assertEqual(self.nx(*u, "lock", "-t", "30", "job").returncode, 0)
                busy = self.js(*u, "run-locked", "-n", "job", "true", status=75)
                self.assertEqual(busy["acquired"], False)
                self.assertIn("held_until", busy)

    def test_holder_details(self):
        p = self.popen("run-locked", "job", "sleep", "30")
        self.addCleanup(p.wait)
        self.addCleanup(p.send_signal, signal.SIGTERM)
        # The details are written once the child has started, just after the lock.
        answers = []

        def described():
            answers.append(json.loads(self.nx("--json", "status", "job").stdout))
            return "holder" in answers[-1]
        wait_for(described)
        status = answers[-1]
        self.assertEqual(status["exit_status"], 0)
        holder = status["holder"]
        self.assertEqual(holder["pid"], p.pid)
        self.assertEqual(holder["command"], "sleep 30")
        self.assertEqual(holder["host"], os.uname().nodename)
        self.assertLessEqual(abs(holder["acquired_at"] - time.time()), 5)

    def test_errors_are_json_too(self):
        cases = [
            (64, ["get", ""]),
            (64, ["-u", "gopher://x", "get", "k"]),
            (64, ["lock", "--no-such-option", "k"]),
            # Refused by a check before CLI11 has stored --json itself.
            (64, ["--io-timeout", "0", "status", "k"]),
            (69, ["-u", "redis://127.0.0.1:1", "--io-timeout", "1", "get", "k"]),
            (77, ["-u", "redis://:wrong@127.0.0.1:%d" % self.redis.port, "get", "k"]),
        ]
        self.assertEqual(self.nx("setnx", "data", "not a timestamp").returncode, 0)
        cases.append((65, ["lock", "-n", "data"]))
        for status, args in cases:
            with self.subTest(args=args):
                r = self.nx("--json", *args)
                self.assertEqual(r.returncode, status, r.stderr)
                out = json.loads(r.stdout)
                self.assertEqual(out["exit_status"], status)
                self.assertEqual(set(out["error"]), {"subject", "message"})
                # The same one line also goes to stderr.
                self.assertTrue(r.stderr.decode().startswith("nxlock: "), r.stderr)
                self.assertNotIn("wrong", r.stdout.decode() + r.stderr.decode())


def faketime_env(env):
    """For faketime(1): real monotonic time, and an ASan build that accepts the preload."""
    asan = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
    return dict(env, FAKETIME_DONT_FAKE_MONOTONIC="1", ASAN_OPTIONS=asan)


class BusyJsonClock(NxlockTestCase):
    """A busy lock's seconds_left comes from the clock that found it held."""

    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_seconds_left_with_a_skewed_local_clock(self):
        url = self.redis.url + "/1"
        self.assertEqual(self.nx("-u", url, "lock", "-t", "30", "k").returncode, 0)
        env = faketime_env(self.env)
        for clock in (["--clock", "server"], []):
            with self.subTest(clock=clock):
                # This host's clock is an hour ahead of the server's.
                r = subprocess.run(["faketime", "-f", "+1h", BIN, "--json", "-u", url, "lock",
                                    "-n", *clock, "k"], env=env, capture_output=True,
                                   timeout=COMMAND_TIMEOUT)
                self.assertEqual(r.returncode, 75, r.stderr)
                left = json.loads(r.stdout)["seconds_left"]
                self.assertTrue(1 <= left <= 32, "seconds_left %d" % left)

    def test_seconds_left_under_clock_local(self):
        url = self.redis.url + "/1"
        env = faketime_env(self.env)
        # The holder's and the waiter's clocks agree with each other, not the server's.
        fake = ["faketime", "-f", "-1h"]
        r = subprocess.run([*fake, BIN, "-u", url, "lock", "--clock", "local", "-t", "30", "k"],
                           env=env, capture_output=True, timeout=COMMAND_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([*fake, BIN, "--json", "-u", url, "lock", "-n", "--clock", "local",
                            "k"], env=env, capture_output=True, timeout=COMMAND_TIMEOUT)
        self.assertEqual(r.returncode, 75, r.stderr)
        left = json.loads(r.stdout)["seconds_left"]
        self.assertTrue(1 <= left <= 32, "seconds_left %d" % left)


if __name__ == "__main__":
    unittest.main()
