"""The embedded store under production faults: tokens that never go back, a live
holder never taken over because of a clock, no store made by a read. (Nothing left
behind: test_nothing_piles_up.py.)"""
import json
import os
import shutil
import signal
import stat
import subprocess
import unittest

from faults import FileSafetyCase
from harness import BIN, COMMAND_TIMEOUT, read, wait_for

class TestTokens(FileSafetyCase):
    """A lost counter or lost records never make a token go back."""

    def test_tokens_increase_after_the_counter_and_the_store_are_lost(self):
        tokens = []
        for loss in ("none", "counter", "counter", "store", "store"):
            if loss == "counter":
                subprocess.run(["rm", "-f", os.path.join(self.store_path, "fence")], check=True)
            elif loss == "store":
                subprocess.run(["rm", "-rf", self.store_path], check=True)
            got = self.lock_json("-n", "k")
            tokens.append(got["fence"])
            r = self.nx("unlock", "k", got["value"])
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.nx("run-locked", "-n", "k", "sh", "-c", 'echo "$NXLOCK_FENCE"')
            self.assertEqual(r.returncode, 0, r.stderr)
            tokens.append(int(r.stdout))
        for earlier, later in zip(tokens, tokens[1:]):
            self.assertGreater(later, earlier, tokens)
        # Tokens are microseconds since the epoch at least: up to 16 digits.
        self.assertLessEqual(len(str(tokens[-1])), 16)


class TestClockSteps(FileSafetyCase):
    """A live run-locked on this host is not taken over because a caller's
    clock says its lock expired; liveness never ends a lock sooner than its timestamp."""

    def test_a_caller_an_hour_ahead_does_not_take_a_live_run_locked(self):
        p = self.start_run_locked("live", "-t", "5")
        r = self.faked("+1h", "lock", "-n", "live")
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.faked("+1h", "run-locked", "-w", "2", "live", "true")
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.faked("+1h", "lock", "-n", "live")
        self.assertEqual(r.returncode, 75, r.stderr)
        # The holder kept its lock throughout, and ends normally.
        os.kill(p.pid, signal.SIGTERM)
        _, err = p.communicate(timeout=COMMAND_TIMEOUT)
        self.assertNotIn(b"lost", err)
        self.assertEqual(self.nx("get", "live").returncode, 1)

    def test_a_stopped_holder_keeps_only_its_timestamp(self):
        p = self.start_run_locked("stopped", "-t", "30", "--kill-after", "1")
        os.kill(p.pid, signal.SIGSTOP)
        try:
            self.assertTrue(wait_for(lambda: read("/proc/%d/stat" % p.pid)
                                     .rsplit(")", 1)[1].split()[0] == "T", timeout=5))
            r = self.faked("+1h", "lock", "-n", "stopped")
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        p.communicate(timeout=COMMAND_TIMEOUT)
        self.assertEqual(p.returncode, 79)

    def test_locks_of_processes_that_exited_keep_their_timestamps_meaning(self):
        # `lock`: its process exits at once.
        r = self.nx("lock", "-t", "60", "plain")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.faked("+1h", "lock", "-n", "plain")
        self.assertEqual(r.returncode, 0, r.stderr)
        # run-locked --hold: the hold's write is made by an nxlock that then exits.
        r = self.nx("run-locked", "--hold", "60", "held", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.nx("status", "held").returncode, 0)
        r = self.faked("+1h", "lock", "-n", "held")
        self.assertEqual(r.returncode, 0, r.stderr)
        # An abandoned lock whose timestamp says expired, for a caller whose clock is right.
        r = self.faked("-2h", "lock", "-t", "10", "old")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("lock", "-n", "old")
        self.assertEqual(r.returncode, 0, r.stderr)


class TestMissingStore(FileSafetyCase):
    """`status` and `get` on a store that does not exist create nothing."""

    def test_reads_of_a_missing_store_create_nothing(self):
        missing = os.path.join(self.tmp, "not", "there")
        for args, env in (((), dict(self.env, NXLOCK_STORE=missing)),
                          (("-u", "file://" + missing), self.env)):
            with self.subTest(args=args):
                r = self.nx(*args, "status", "k", env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(b"free", r.stdout)
                r = self.nx(*args, "--json", "status", "k", env=env)
                self.assertEqual(json.loads(r.stdout)["state"], "free")
                r = self.nx(*args, "get", "k", env=env)
                self.assertEqual((r.returncode, r.stdout), (1, b""), r.stderr)
                r = self.nx(*args, "unlock", "--force", "k", env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "not")))
        # The first write makes it.
        r = self.nx("setnx", "k", "v", env=dict(self.env, NXLOCK_STORE=missing))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isdir(missing))

    @unittest.skipUnless(os.geteuid() == 0, "runs nxlock as nobody through setpriv")
    def test_a_home_that_does_not_exist_names_the_default_store(self):
        # A system user as cron runs it: HOME=/nonexistent, which it cannot create.
        if os.path.exists("/nonexistent"):
            self.skipTest("/nonexistent exists here")
        # The checkout may sit in a private (0700) directory: nobody runs a copy.
        os.chmod(self.tmp, 0o755)
        binary = os.path.join(self.tmp, "nxlock")
        shutil.copy(BIN, binary)
        env = {k: v for k, v in self.env.items() if k not in ("NXLOCK_STORE", "XDG_STATE_HOME")}
        env["HOME"] = "/nonexistent"

        def nobody(*args):
            return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   binary, *args], env=env, capture_output=True,
                                  timeout=COMMAND_TIMEOUT)
        for args in (["lock", "k"], ["setnx", "k", "v"]):
            with self.subTest(args=args):
                self.assertOneLineError(
                    nobody(*args), 77,
                    "/nonexistent/.local/state/nxlock: create directory /nonexistent: ",
                    "(the default store, from HOME; set NXLOCK_STORE or give --url file:///PATH)")
        # Reads still create nothing, and say nothing is there.
        r = nobody("status", "k")
        self.assertEqual((r.returncode, r.stderr), (1, b""))
        self.assertIn(b"free", r.stdout)
        r = nobody("get", "k")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (1, b"", b""))
        self.assertFalse(os.path.exists("/nonexistent"))
        # A store named explicitly keeps its plain message: it is no default.
        r = nobody("-u", "file:///nonexistent/store", "lock", "k")
        self.assertOneLineError(r, 77, "/nonexistent: create directory: ")
        self.assertNotIn(b"default store", r.stderr)


class TestStoreAccess(FileSafetyCase):
    """Who may use a store: an explicit path is made as the umask says, the per-user
    default is private, and a user it refuses is told so in one line about the store."""

    def make_store(self, umask):
        old = os.umask(umask)
        try:
            for key in ("a", "b", "c"):
                r = self.nx("-u", "file://" + self.store_path, "lock", "-t", "300", key)
                self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            os.umask(old)

    @unittest.skipUnless(os.geteuid() == 0, "runs nxlock as nobody through setpriv")
    def test_a_user_the_store_refuses_is_told_about_the_store_not_its_files(self):
        # Under umask 022 nobody may read root's store but not write it (data/XY,
        # fence, .tmp files refused); under 077 not even open it.
        for umask in (0o022, 0o077):
            shutil.rmtree(self.store_path, ignore_errors=True)
            self.make_store(umask)
            for args in (("lock", "a"), ("lock", "other"), ("setnx", "k", "v"),
                         ("unlock", "--force", "a"), ("run-locked", "b", "true"),
                         ("-u", "file://" + self.store_path, "lock", "new")):
                with self.subTest(umask=oct(umask), args=args):
                    r = self.nx_as_nobody(*args)
                    self.assertOneLineError(
                        r, 77, "nxlock: store %s: permission denied to nobody; " % self.store_path,
                        "run as its owner (root), or share it with a group (chgrp -R GROUP ",
                        "nxlock doctor")
                    for internal in (b"/data", b"/fence", b".tmp", b"nxlock-store"):
                        self.assertNotIn(internal, r.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "runs nxlock as nobody through setpriv")
    def test_a_missing_store_under_a_read_only_parent_is_told_to_be_made(self):
        # No group to share yet (chgrp -R on a directory that does not exist):
        # it must be made for this user, or put elsewhere, as doctor says.
        parent = os.path.join(self.tmp, "ro")
        os.mkdir(parent, 0o755)
        store = os.path.join(parent, "s")
        # (NXLOCK_STORE's own message names the variable: test_the_default_store...)
        for args in (["-u", "file://" + store, "lock", "k"],
                     ["-u", "file://" + store, "run-locked", "k", "true"]):
            with self.subTest(args=args):
                r = self.nx_as_nobody(*args)
                self.assertOneLineError(
                    r, 77, "store %s: does not exist, and %s is not writable by nobody; create "
                    "%s for this user, or give a path under a directory it may write; nxlock "
                    "doctor checks it" % (store, parent, store))
                self.assertNotIn(b"chgrp", r.stderr)
        # doctor says the path once.
        r = self.nx_as_nobody("-u", "file://" + store, "doctor")
        self.assertEqual(r.returncode, 77, r.stderr)
        self.assertEqual(r.stderr.decode(), "nxlock: file://%s: does not exist, and %s is not "
                         "writable by nobody\n" % (store, parent))
        self.assertIn("FAIL path %s: does not exist" % store, r.stdout.decode())
        self.assertFalse(os.path.exists(store))

    def test_a_store_named_by_nxlock_store_honours_the_umask_and_the_setgid_group(self):
        # As file:// does: a group can share it.
        for how in ("NXLOCK_STORE", "file://"):
            with self.subTest(how=how):
                parent = os.path.join(self.tmp, how.strip(":/").lower())
                os.mkdir(parent)
                os.chmod(parent, 0o2775)
                os.chown(parent, -1, 65534)
                store = os.path.join(parent, "store")
                old = os.umask(0o022)
                try:
                    if how == "NXLOCK_STORE":
                        r = self.nx("setnx", "k", "v", env=dict(self.env, NXLOCK_STORE=store))
                    else:
                        r = self.nx("-u", "file://" + store, "setnx", "k", "v")
                finally:
                    os.umask(old)
                self.assertEqual(r.returncode, 0, r.stderr)
                st = os.stat(store)
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o2755)
                self.assertEqual(st.st_gid, 65534)

    @unittest.skipUnless(os.geteuid() == 0, "runs nxlock as nobody through setpriv")
    def test_the_per_user_default_store_stays_private(self):
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        os.chown(home, 65534, 65534)
        env = {k: v for k, v in self.env.items() if k not in ("NXLOCK_STORE", "XDG_STATE_HOME")}
        env["HOME"] = home
        old = os.umask(0o022)
        try:
            r = self.nx_as_nobody("setnx", "k", "v", env=env)
        finally:
            os.umask(old)
        self.assertEqual(r.returncode, 0, r.stderr)
        store = os.path.join(home, ".local", "state", "nxlock")
        self.assertEqual(stat.S_IMODE(os.stat(store).st_mode), 0o700)


if __name__ == "__main__":
    unittest.main()
