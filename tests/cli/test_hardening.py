"""Hardening (issue 12): faults, hostile input and signals, each fenced by a test."""
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase, RedisServer, die_with_parent, read, wait_for


def proc_stat(pid):
    """(comm, state, ppid) of a process, or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return comm, fields[0], int(fields[1])


def alive(pid, argv0=None):
    """True if `pid` runs (a zombie is dead), and is still the `argv0` we started."""
    stat = proc_stat(pid)
    if stat is None or stat[1] == "Z":
        return False
    if argv0 is not None:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().split(b"\0")[0].endswith(argv0.encode())
        except FileNotFoundError:
            return False
    return True


def bucket_of(key):
    """The embedded store's bucket of a key: (stripe, name), FNV-1a 64 in hex."""
    h = 0xcbf29ce484222325
    for byte in key.encode():
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    name = "%016x" % h
    return name[:2], name


def descendants(root):
    """Every process descended from `root`, from one walk of /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None:
                children.setdefault(stat[2], []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class JobDiesWithNxlock(NxlockTestCase):
    """Finding 1: no part of the job outlives nxlock, however nxlock is SIGKILLed."""

    def start_job(self, launcher, **popen_args):
        """Runs a job of two `&` grandchildren under run-locked; returns (process, pids)."""
        pidfile = os.path.join(self.tmp, "pids")
        script = ('sleep 105 & echo $! >> {f}.tmp; sleep 106 & echo $! >> {f}.tmp; '
                  'mv {f}.tmp {f}; wait').format(f=pidfile)
        p = subprocess.Popen([*launcher, BIN, "run-locked", "-t", "5", "k", "sh", "-c", script],
                             env=self.env, stdout=subprocess.DEVNULL, **popen_args)
        self.addCleanup(self.reap, p)
        self.assertTrue(wait_for(lambda: len(read(pidfile).split()) == 2),
                        "the job did not start")
        pids = [int(pid) for pid in read(pidfile).split()]
        # Whatever happens, stop what we started (by pid, and only if it is still ours).
        self.addCleanup(lambda: [os.kill(pid, signal.SIGKILL) for pid in pids
                                 if alive(pid, "sleep")])
        # `echo $!` may run before the forked shell has exec'd sleep: wait for it.
        self.assertTrue(wait_for(lambda: all(alive(pid, "sleep") for pid in pids)),
                        "the job's sleeps did not start")
        return p, pids

    def reap(self, p):
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)

    def assertJobGone(self, pids):
        for pid in pids:
            self.assertTrue(wait_for(lambda: not alive(pid, "sleep"), timeout=10),
                            "job process %d outlived nxlock" % pid)
        # ...and the lock it held is free for the next holder (or expires: -t 5).
        r = self.nx("run-locked", "-w", "10", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_timeout_s_kill(self):
        # timeout(1) puts itself and nxlock in a new process group, SIGKILLs nxlock,
        # then the whole group (itself included).
        p, pids = self.start_job(["timeout", "-s", "KILL", "3"], preexec_fn=die_with_parent)
        self.assertIn(p.wait(timeout=20), (-signal.SIGKILL, 128 + signal.SIGKILL))
        self.assertJobGone(pids)

    def test_kill_9_process_group(self):
        p, pids = self.start_job([], start_new_session=True)
        os.killpg(p.pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)
        self.assertJobGone(pids)

    def test_sigkill_to_every_process_named_nxlock(self):
        # What `killall -9 nxlock` does, limited to the processes this test started.
        p, pids = self.start_job([], start_new_session=True)
        named = [pid for pid in descendants(os.getpid())
                 if (proc_stat(pid) or ("",))[0] == "nxlock"]
        self.assertIn(p.pid, named)
        # Stopped first, so that they all die at once, as far as the others can tell.
        for pid in named:
            os.kill(pid, signal.SIGSTOP)
        for pid in named:
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(p.wait(timeout=10), -signal.SIGKILL)
        self.assertJobGone(pids)


class PasswordsStayPrivate(NxlockTestCase):
    """Finding 2: no URL password in the holder record, its displays, traces or the child."""

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


class Durations(NxlockTestCase):
    """Finding 3: every duration is honoured or refused with 64 and a readable bound."""

    def test_out_of_range_durations_are_usage_errors(self):
        self.assertEqual(self.nx("lock", "-t", "60", "busy").returncode, 0)
        cases = []
        for value in ("1e308", "9.3e12", "1e13", "nan", "inf", "-1", "1000001"):
            cases += [["lock", "-w", value, "busy"],
                      ["run-locked", "--kill-after", value, "k", "true"],
                      ["--timeout", value, "get", "k"]]
        cases.append(["--timeout", "0.0000001", "get", "k"])
        cases.append(["--timeout", "0", "get", "k"])
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
                    r = self.nx("-u", url, "--timeout", timeout, "get", "k", timeout=10)
                    self.assertIn(r.returncode, (64, 69), r.stderr)

    def test_durations_in_range_are_honoured(self):
        self.assertEqual(self.nx("lock", "-t", "60", "busy").returncode, 0)
        start = time.monotonic()
        r = self.nx("lock", "-w", "0.5", "busy")
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertGreaterEqual(time.monotonic() - start, 0.5)
        self.assertEqual(self.nx("lock", "-w", "1000000", "free").returncode, 0)
        r = self.nx("--timeout", "1000000", "run-locked", "--kill-after", "1000000", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)


class FarFutureLockValues(NxlockTestCase):
    """Finding 4: a waiter on a far-future or overflowing value sleeps; its date prints sanely."""

    values = ("9999999999999", "999999999999999999")

    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_waiter_on_the_file_store_does_not_spin(self):
        # LeakSanitizer cannot run under ptrace: an ASan build checks leaks elsewhere.
        asan = ":".join(filter(None, [self.env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
        for value in self.values:
            with self.subTest(value=value):
                self.nx("del", "far")
                self.assertEqual(self.nx("setnx", "far", value).returncode, 0)
                out = os.path.join(self.tmp, "strace")
                r = subprocess.run(["strace", "-f", "-e", "trace=openat", "-o", out,
                                    BIN, "lock", "-w", "2", "far"],
                                   env=dict(self.env, ASAN_OPTIONS=asan), capture_output=True,
                                   timeout=COMMAND_TIMEOUT)
                self.assertEqual(r.returncode, 75, r.stderr)
                opens = sum(1 for line in open(out) if "openat(" in line)
                # A poll tick is 100-300 ms: a few openat per look, ~20 looks.
                self.assertLess(opens, 300, "%d openat calls in a 2 s wait" % opens)

    def test_waiter_on_redis_does_not_spin(self):
        url = self.redis.url + "/1"
        for value in self.values:
            with self.subTest(value=value):
                self.redis.cli("-n", "1", "SET", "far", value)
                self.redis.cli("CONFIG", "RESETSTAT")
                r = self.nx("-u", url, "lock", "-w", "2", "far")
                self.assertEqual(r.returncode, 75, r.stderr)
                stats = self.redis.cli("INFO", "commandstats").decode()
                found = re.search(r"cmdstat_get:calls=(\d+)", stats)
                gets = int(found.group(1)) if found else 0
                self.assertLess(gets, 100, "%d GETs in a 2 s wait" % gets)

    def test_dates_beyond_9999_print_sanely(self):
        for value in self.values:
            with self.subTest(value=value):
                self.nx("del", "far")
                self.assertEqual(self.nx("setnx", "far", value).returncode, 0)
                status = self.nx("status", "far").stdout.decode()
                self.assertIn("held until beyond the year 9999", status)
                busy = self.nx("lock", "-n", "far").stderr.decode()
                self.assertIn("busy, held until beyond the year 9999", busy)


class SignalAfterTakingTheLock(NxlockTestCase):
    """Finding 9: a SIGTERM between the store write and the printed value loses nothing."""

    def test_sigterm_before_lock_prints(self):
        # `lock` writes the lock, then the holder details under {k}:holder, then
        # prints. Holding the stripe lock of {k}:holder's bucket stops it in between.
        stripe, _ = bucket_of("{k}:holder:k")
        self.assertNotEqual(stripe, bucket_of("k")[0])
        neighbour = next("n%d" % i for i in range(100000) if bucket_of("n%d" % i)[0] == stripe)
        self.assertEqual(self.nx("setnx", neighbour, "x").returncode, 0)  # creates the stripe
        fd = os.open(os.path.join(self.store_path, "data", stripe), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        fcntl.flock(fd, fcntl.LOCK_EX)
        p = self.popen("lock", "-t", "60", "k", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: self.nx("get", "k").returncode == 0), "lock not taken")
        self.assertIsNone(p.poll())  # stopped on the holder's stripe
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # the signal is pending before the store lets go
        fcntl.flock(fd, fcntl.LOCK_UN)
        out, err = p.communicate(timeout=COMMAND_TIMEOUT)
        stored = self.nx("get", "k")
        if p.returncode == 0:
            # Printed: the caller has the value to unlock with.
            self.assertEqual(out.strip(), stored.stdout.strip(), err)
        else:
            # Or released: nobody holds it.
            self.assertEqual(stored.returncode, 1,
                             "exit %d, nothing printed, lock left held" % p.returncode)


class ForceUnlockCorruptHolder(NxlockTestCase):
    """Finding 10: unlock --force releases even when the holder record is corrupt."""

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


def faketime_env(env):
    """For faketime(1): real monotonic time, and an ASan build that accepts the preload."""
    asan = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
    return dict(env, FAKETIME_DONT_FAKE_MONOTONIC="1", ASAN_OPTIONS=asan)


class BusyJsonClock(NxlockTestCase):
    """Finding 11: seconds_left comes from the clock that found the lock held."""

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


class PrivateCheckout(unittest.TestCase):
    """Finding 12: tests that run nxlock as another user work from a mode-0700 checkout."""

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


class UnknownCommand(NxlockTestCase):
    """Finding 13: a word that is not a command is named, and the commands listed."""

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



class WakeUpIsBestEffort(NxlockTestCase):
    """Finding 6: a user whose ACL forbids PUBLISH still releases (exit 0); the
    wake-up is best effort, and the holder details go with the lock."""

    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def setUp(self):
        super().setUp()
        self.redis.cli("ACL", "SETUSER", "nopub", "reset", "on", ">nopub-pw", "~*", "&*",
                       "+@all", "-publish")
        self.addCleanup(self.redis.cli, "ACL", "DELUSER", "nopub")
        self.url = "redis://nopub:nopub-pw@127.0.0.1:%d" % self.redis.port

    def test_unlock_without_publish_permission(self):
        taken = self.nx("-u", self.url, "lock", "k")
        self.assertEqual(taken.returncode, 0, taken.stderr)
        self.assertNotEqual(self.redis.cli("EXISTS", "{k}:holder:k").strip(), b"0")
        released = self.nx("-u", self.url, "unlock", "k", taken.stdout.strip())
        self.assertEqual(released.returncode, 0, released.stderr)
        self.assertEqual(self.redis.cli("EXISTS", "k", "{k}:holder:k").strip(), b"0")

    def test_forced_unlock_without_publish_permission(self):
        self.assertEqual(self.nx("-u", self.url, "lock", "k").returncode, 0)
        forced = self.nx("-u", self.url, "unlock", "--force", "k")
        self.assertEqual(forced.returncode, 0, forced.stderr)
        self.assertEqual(self.redis.cli("EXISTS", "k").strip(), b"0")

    def test_run_locked_without_publish_permission(self):
        r = self.nx("-u", self.url, "run-locked", "k", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"not released", r.stderr)
        self.assertEqual(self.redis.cli("EXISTS", "k", "{k}:holder:k").strip(), b"0")

if __name__ == "__main__":
    unittest.main()
