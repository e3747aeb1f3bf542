"""A password in a --url never shows: not in the holder record, nor where it is shown
(status, busy messages, -v traces), nor in the job's environment unless asked."""
import json
import os
import subprocess
import unittest

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase, RedisServer


class PasswordsStayPrivate(NxlockTestCase):
    """No URL password in the holder record, its displays, traces or the child's environment."""

    password = "pw-4f9c1e-secret"

    @classmethod
    def setUpClass(cls):
        cls.locked = RedisServer(password=cls.password)
        cls.addClassCleanup(cls.locked.stop)

    def setUp(self):
        super().setUp()
        self.locked.flushall()
        self.url = "redis://:%s@127.0.0.1:%d" % (self.password, self.locked.port)

    def test_holder_record_and_what_shows_it(self):
        # The lock outlives nxlock, so it describes the shell that asked: its
        # command line holds the URL, an environment assignment and an option.
        script = ('v=$(NXLOCK_PASSWORD={pw} "$0" -v -u {url} lock -t 60 k 2>"$1"); '
                  ': --password {pw} REDISCLI_AUTH={pw}').format(pw=self.password, url=self.url)
        trace = os.path.join(self.tmp, "trace")
        subprocess.run(["bash", "-c", script, BIN, trace], env=self.env, check=True,
                       timeout=COMMAND_TIMEOUT)
        record = self.locked.cli("GET", "{k}:holder:k")
        self.assertIn(b"lock -t 60 k", record)  # the record is there, and is the shell's
        shown = {
            "record": record,
            "trace": open(trace, "rb").read(),
            "status": self.nx("-u", self.url, "status", "k").stdout,
            "status --json": self.nx("-u", self.url, "--json", "status", "k").stdout,
            "busy message": self.nx("-u", self.url, "lock", "-n", "k").stderr,
            "busy --json": self.nx("-u", self.url, "--json", "lock", "-n", "k").stdout,
        }
        self.assertIn(b"***", shown["status"])
        for where, text in shown.items():
            with self.subTest(where=where):
                self.assertNotIn(self.password.encode(), text)

    def test_run_locked_records_its_command_redacted(self):
        # The child asks for the status of its own lock; its command line holds the URL.
        # run-locked writes the holder's details just after the child starts, so the
        # child asks until they are there (for at most 10 s).
        ask = ('for i in $(seq 100); do s=$("$0" -u "$1" status k); '
               'case "$s" in *"holder: "*) break;; esac; sleep 0.1; done; printf "%s" "$s"')
        r = self.nx("-u", self.url, "run-locked", "k", "sh", "-c", ask, BIN, self.url)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"holder: ", r.stdout)
        self.assertIn(b"redis://:***@", r.stdout)
        self.assertNotIn(self.password.encode(), r.stdout)

    def test_records_of_other_clients_are_redacted_when_shown(self):
        r = self.nx("-u", self.url, "lock", "-t", "60", "k")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        self.locked.cli("SET", "{k}:holder:k", json.dumps({
            "value": value, "host": "h", "pid": 1, "acquired_at": 1,
            "command": "job redis://:%s@db --token=%s" % (self.password, self.password)}))
        for args in (["status", "k"], ["--json", "status", "k"], ["lock", "-n", "k"]):
            with self.subTest(args=args):
                r = self.nx("-u", self.url, *args)
                self.assertIn(b"***", r.stdout + r.stderr)
                self.assertNotIn(self.password.encode(), r.stdout + r.stderr)

    def child_environment(self, *options):
        env = dict(self.env, NXLOCK_PASSWORD=self.password, REDISCLI_AUTH=self.password,
                   NXLOCK_URL=self.url)
        r = self.nx("run-locked", *options, "k", "env", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return dict(line.split("=", 1) for line in r.stdout.decode().splitlines() if "=" in line)

    def test_child_does_not_inherit_the_password(self):
        child = self.child_environment()
        self.assertFalse("NXLOCK_PASSWORD" in child, "NXLOCK_PASSWORD inherited")
        self.assertFalse("REDISCLI_AUTH" in child, "REDISCLI_AUTH inherited")
        # The URL stays, without its password: an nxlock in the job fails loudly.
        self.assertEqual(child["NXLOCK_URL"], "redis://:***@127.0.0.1:%d" % self.locked.port)
        self.assertNotIn(self.password, "\n".join(child.values()))

    def test_inherit_credentials_passes_them_on(self):
        child = self.child_environment("--inherit-credentials")
        self.assertEqual(child["NXLOCK_PASSWORD"], self.password)
        self.assertEqual(child["REDISCLI_AUTH"], self.password)
        self.assertEqual(child["NXLOCK_URL"], self.url)


if __name__ == "__main__":
    unittest.main()
