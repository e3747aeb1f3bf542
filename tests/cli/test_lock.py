"""lock/unlock/renew/status and the documented algorithm under real contention, on every backend:
taking and releasing, expiry and takeover, waiting and waking, contention, interoperation with a
client written from the SETNX page, far-future values, and a signal while the lock is being taken."""
import fcntl
import json
import os
import random
import re
import select
import signal
import subprocess
import threading
import time
import unittest

from harness import (BIN, COMMAND_TIMEOUT, NxlockTestCase, bucket_of, dying_with_parent, smoke,
                     wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))

# A critical section that logs its entry and exit with wall-clock nanoseconds;
# $PPID is the job's parent, nxlock's watchdog (run-locked execs sh directly under it);
# the watchdog's parent is the nxlock process holding the lock.
# A critical section, logged; one stopped by SIGTERM (a dead nxlock's watchdog stops
# its job so, then releases the lock) logs its true end too: the time the test sent
# its SIGKILL to nxlock can be recorded late on a loaded machine, after the next
# holder's entry. The trap comes first: a SIGTERM just after the entry was logged
# (the killer strikes as soon as it reads it) would otherwise end the section
# unlogged. One that ends it before its entry logs an exit alone: no section.
SECTION = ('trap \'echo "exit $(date +%s%N) $PPID" >> "$0"; exit 143\' TERM; '
           'echo "enter $(date +%s%N) $PPID" >> "$0"; '
           'sleep "$1"; trap - TERM; echo "exit $(date +%s%N) $PPID" >> "$0"')


def parse_sections(log_path, kills=()):
    """Intervals (start, end, who) from a section log; killed holders end at their kill time."""
    open_sections, intervals = {}, []
    with open(log_path) as f:
        for line in f:
            kind, stamp, who = line.split()
            if kind == "enter":
                open_sections[who] = int(stamp)
            elif who in open_sections:  # else stopped before its entry: no section
                intervals.append((open_sections.pop(who), int(stamp), who))
    kill_times = dict(kills)
    for who, start in open_sections.items():
        end = kill_times.get(who)
        if end is None:
            raise AssertionError("section of %s entered but never left nor killed" % who)
        intervals.append((start, end, who))
    return sorted(intervals)


def overlaps(intervals):
    return [(a, b) for a, b in zip(intervals, intervals[1:]) if b[0] < a[1]]


def stop(process):
    """Cleanup: SIGKILL a process the test started, if it still runs, and reap it."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream:
            stream.close()


class LockTestCase(NxlockTestCase):
    """Starts the Redis that backends() includes, once per class."""

    @classmethod
    def setUpClass(cls):
        cls.start_redis()


class TakeAndRelease(LockTestCase):
    """lock, status, unlock and renew: a held lock's whole life, on every backend."""

    def test_lock_status_unlock_cycle(self):
        # The value is the page's bare timestamp, and the holder details a key `get` reads.
        for backend in self.backends(offering=("timestamp", "kv")):
            with self.subTest(backend=backend.name):
                u = backend.args()
                before = int(time.time())
                r = self.nx(*u, "lock", "-t", "30", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                value = r.stdout.decode().strip()
                self.assertTrue(before + 31 <= int(value) <= int(time.time()) + 31 + 1, value)

                r = self.nx(*u, "lock", "-n", "job")
                self.assertEqual(r.returncode, 75)
                self.assertIn(b"held until", r.stderr)
                self.assertEqual(self.nx(*u, "lock", "-n", "-E", "3", "job").returncode, 3)

                r = self.nx(*u, "status", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(value.encode(), r.stdout)
                status = json.loads(self.nx(*u, "--json", "status", "job").stdout)
                self.assertEqual((status["state"], status["value"]), ("held", value))
                self.assertEqual(status["holder"]["pid"], os.getpid())

                r = self.nx(*u, "unlock", "job", str(int(value) + 1))
                self.assertEqual(r.returncode, 1)
                self.assertIn(b"held by another value", r.stderr)
                r = self.nx(*u, "renew", "-t", "60", "job", value)
                self.assertEqual(r.returncode, 0, r.stderr)
                renewed = r.stdout.decode().strip()
                self.assertGreater(int(renewed), int(value))
                self.assertEqual(self.nx(*u, "unlock", "job", value).returncode, 1)
                self.assertEqual(self.nx(*u, "unlock", "job", renewed).returncode, 0)
                self.assertEqual(self.nx(*u, "status", "job").returncode, 1)
                self.assertEqual(self.nx(*u, "unlock", "job", renewed).returncode, 1)
                # Nothing left behind: neither the lock nor its holder details.
                self.assertEqual(self.nx(*u, "get", "{job}:holder:job").returncode, 1)

                self.assertEqual(self.nx(*u, "lock", "job").returncode, 0)
                self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)
                self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 1)


    @smoke
    def test_a_second_taker_gets_75(self):
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                r = self.nx(*u, "lock", "-t", "60", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                value = r.stdout.decode().strip()
                r = self.nx(*u, "lock", "-n", "job")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"busy", r.stderr)
                self.assertEqual(backend.values("job"), [value] * backend.copies,
                                 "the loser left nothing of its own")

    @smoke
    def test_unlock_releases_everywhere(self):
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                r = self.nx(*u, "lock", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                value = r.stdout.decode().strip()
                r = self.nx(*u, "unlock", "job", value)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(backend.values("job"), [None] * backend.copies)
                r = self.nx(*u, "unlock", "job", value)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(b"no such lock", r.stderr)

    @smoke
    def test_a_renewed_value_cannot_be_renewed_again(self):
        # Renewed from `value` to `renewed`, `value` is no one's: renewing it in the
        # same second computes `renewed` again, which must not pass for its own (on a
        # quorum, each server computes it).
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                for _ in range(5):
                    r = self.nx(*u, "lock", "-t", "60", "job")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    value = r.stdout.decode().strip()
                    taken = int(time.time())
                    # A later second than the lock's (else the renewal writes `value` again).
                    wait_for(lambda: int(time.time()) > taken and time.time() % 1 < 0.5,
                             timeout=3, interval=0.01)
                    second = int(time.time())
                    r = self.nx(*u, "renew", "-t", "60", "job", value)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    again = self.nx(*u, "renew", "-t", "60", "job", value)
                    if int(time.time()) == second:
                        break
                    self.nx(*u, "unlock", "--force", "job")
                renewed = r.stdout.decode().strip()
                self.assertNotEqual(renewed, value)
                self.assertEqual(again.returncode, 1, again.stderr)
                self.assertEqual(backend.values("job"), [renewed] * backend.copies)


class ExpiryAndTakeover(LockTestCase):
    """An expired lock is taken over, by the clock that decides; garbage never is."""

    # The page's clients write the lock's key with setnx: where they can, and where
    # the value is the page's timestamp.

    def test_expired_lock_is_taken_over_and_not_unlockable(self):
        for backend in self.backends(offering=("timestamp", "kv")):
            with self.subTest(backend=backend.name):
                u = backend.args()
                stale = str(int(time.time()) - 5)
                self.nx(*u, "setnx", "job", stale)
                self.assertEqual(self.nx(*u, "status", "job").returncode, 1)
                self.assertEqual(self.nx(*u, "unlock", "job", stale).returncode, 1)
                self.assertEqual(self.nx(*u, "get", "job").stdout.strip(), stale.encode())
                self.assertEqual(self.nx(*u, "lock", "-n", "job").returncode, 0)

    def test_garbage_is_never_broken(self):
        for backend in self.backends(offering=("timestamp", "kv")):
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.nx(*u, "setnx", "data", "not a timestamp")
                r = self.nx(*u, "lock", "-n", "data")
                self.assertOneLineError(r, 65, "data")
                self.assertEqual(self.nx(*u, "get", "data").stdout, b"not a timestamp\n")
                self.assertEqual(self.nx(*u, "status", "data").returncode, 65)

    def test_unlock_says_why_truly(self):
        for backend in self.backends(offering=("timestamp", "kv")):
            with self.subTest(backend=backend.name):
                u = backend.args()
                future = str(int(time.time()) + 300)
                # A key that never held a lock: no such lock, whatever the value.
                for value in (future, str(int(time.time()) - 300)):
                    out = json.loads(self.nx(*u, "--json", "unlock", "never", value).stdout)
                    self.assertEqual((out["released"], out["reason"]), (False, "absent"))
                # Data that is no lock timestamp: 65, as status says, and left alone.
                self.nx(*u, "setnx", "data2", "not a timestamp")
                self.assertOneLineError(self.nx(*u, "unlock", "data2", future), 65, "data2")
                self.assertEqual(self.nx(*u, "get", "data2").stdout, b"not a timestamp\n")

    def test_the_server_clock_decides_for_a_skewed_client(self):
        # A client an hour ahead (libfaketime; nxlock links libc dynamically):
        # on Redis its lock decisions follow the server's TIME by default, and
        # its own clock with --clock local; the embedded store uses the local
        # clock. The --clock local and file cases also show faketime took hold.
        skew = 3600
        env = dict(self.env, FAKETIME_DONT_FAKE_MONOTONIC="1")
        # libfaketime is preloaded ahead of an ASan build's runtime: let that be.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                     "verify_asan_link_order=0"]))

        def skewed(*args):
            return subprocess.run(["faketime", "-f", "+%ds" % skew, BIN, *args], env=env,
                                  capture_output=True, timeout=30)

        for backend in self.backends(offering=("timestamp", "kv")):
            u = backend.args()
            clocks = [("default", [], skew if backend.name == "file" else 0)]
            if backend.name != "file":
                clocks.append(("local", ["--clock", "local"], skew))
            for name, option, ahead in clocks:
                with self.subTest(backend=backend.name, clock=name):
                    self.nx(*u, "del", "job")  # whatever a failed case left
                    # The value written: now + ttl + 1 by the deciding clock.
                    before = int(time.time())
                    r = skewed(*u, "lock", "-n", *option, "-t", "10", "job")
                    after = int(time.time())
                    self.assertEqual(r.returncode, 0, r.stderr)
                    value = int(r.stdout)
                    self.assertTrue(before + ahead + 11 <= value <= after + ahead + 11,
                                    "%d is not now + %d + 11 (now %d)" % (value, ahead, before))
                    self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)
                    # The expiry decision: held for a minute more by the server's clock,
                    # expired for a minute by the skewed one.
                    held_until = str(int(time.time()) + 60)
                    self.assertEqual(self.nx(*u, "setnx", "job", held_until).returncode, 0)
                    r = skewed(*u, "lock", "-n", *option, "job")
                    self.assertEqual(r.returncode, 0 if ahead else 75, r.stderr)
                    r = skewed(*u, "status", *option, "job")
                    self.assertEqual(r.returncode, 0, "%s: %s" % (r.stdout, r.stderr))
                    self.assertEqual(self.nx(*u, "unlock", "--force", "job").returncode, 0)


class WaitingAndWaking(LockTestCase):
    """lock -w: a waiter gives up at its deadline, and wakes on a release or an expiry."""

    def test_wait_times_out(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.assertEqual(self.nx(*u, "lock", "job").returncode, 0)
                start = time.monotonic()
                r = self.nx(*u, "lock", "-w", "0.5", "job")
                elapsed = time.monotonic() - start
                self.assertEqual(r.returncode, 75)
                self.assertGreaterEqual(elapsed, 0.5)
                self.assertLess(elapsed, 5)

    def test_waiter_wakes_on_release_well_before_a_poll_tick(self):
        # Waiters also poll, every 100-300 ms. Release just after the waiter's
        # last look, once it has settled into its wait (two looks: the first is
        # followed by a second once the watch is armed; then 15 ms with no new
        # look, as a spurious wake-up may follow the arming), and time its
        # entry from the release: a poll alone takes at least 100 - 15 ms, a
        # wake-up on release a few ms. The holder is a run-locked whose child
        # ends when told, so no process start-up lies between the release and
        # the clock; the median of several rounds absorbs the odd slow one on a
        # loaded machine.
        rounds = 7
        # The trace's GET is the page's look at the timestamp.
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                latencies = [self.time_one_handoff(u) for _ in range(rounds)]
                median = sorted(latencies)[rounds // 2]
                print("\n%s: waiter entered %s ms after the release (median %.1f ms)"
                      % (backend.name, " ".join("%.1f" % (1000 * x) for x in latencies),
                         1000 * median))
                self.assertLess(median, 0.060, "the waiter did not wake on the release")

    def time_one_handoff(self, u):
        holder = self.popen(*u, "run-locked", "job", "sh", "-c", "read line",
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.addCleanup(stop, holder)
        self.assertTrue(wait_for(lambda: self.nx(*u, "status", "job").returncode == 0))
        waiter = self.popen(*u, "-v", "lock", "-w", "20", "job", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        self.addCleanup(stop, waiter)
        looks = 0
        trace = b""
        deadline = time.monotonic() + 10
        while looks < 2 and time.monotonic() < deadline:
            if select.select([waiter.stderr], [], [], 0.5)[0]:
                line = waiter.stderr.readline()
                trace += line
                looks += b" GET " in line
        self.assertEqual(looks, 2, trace)
        while select.select([waiter.stderr], [], [], 0.015)[0] and time.monotonic() < deadline:
            line = waiter.stderr.readline()
            if not line:
                break
            trace += line
        released = time.monotonic()
        holder.stdin.write(b"\n")
        holder.stdin.close()
        self.assertTrue(select.select([waiter.stdout], [], [], 10)[0], "the waiter never entered")
        value = waiter.stdout.readline().strip()
        entered = time.monotonic()
        self.assertEqual(waiter.wait(timeout=10), 0)
        self.assertEqual(holder.wait(timeout=10), 0)
        waiter.stdout.close()
        waiter.stderr.close()
        self.assertEqual(self.nx(*u, "unlock", "job", value).returncode, 0)
        return entered - released

    def test_waiter_wakes_at_expiry(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                u = backend.args()
                self.assertEqual(self.nx(*u, "lock", "-t", "1", "job").returncode, 0)
                r = self.nx(*u, "lock", "-w", "10", "job")
                self.assertEqual(r.returncode, 0, r.stderr)


class ContendersForAnExpiredLock(LockTestCase):
    """Of ten clients that find the same lock expired, exactly one takes it."""

    def test_ten_contenders_one_expired_lock_exactly_one_wins(self):
        # The expired lock is a page client's timestamp, written with setnx.
        for backend in self.backends(offering=("timestamp", "kv")):
            with self.subTest(backend=backend.name):
                self.ten_contenders_one_expired_lock_exactly_one_wins(backend)

    def ten_contenders_one_expired_lock_exactly_one_wins(self, backend):
        rounds = 30
        winners_total = 0
        for round_ in range(rounds):
            u = backend.args()
            self.nx(*u, "del", "contended")
            self.nx(*u, "setnx", "contended", str(int(time.time()) - 3))
            procs = [self.popen(*u, "lock", "-n", "-t", "30", "contended",
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for _ in range(10)]
            codes = [p.wait(timeout=30) for p in procs]
            values = [p.stdout.read().strip() for p in procs]
            for p in procs:
                p.stdout.close()
                p.stderr.close()
            self.assertEqual(sorted(codes), [0] + [75] * 9,
                             "%s round %d: %s" % (backend.name, round_, codes))
            winners_total += codes.count(0)
            # The losers' GETSETs left the winner's value in place: it can unlock.
            winner_value = values[codes.index(0)]
            self.assertEqual(self.nx(*u, "get", "contended").stdout.strip(), winner_value)
            self.assertEqual(self.nx(*u, "unlock", "contended", winner_value).returncode, 0)
        print("\n%s: %d rounds x 10 contenders, %d winners" % (backend.name, rounds,
                                                              winners_total))


class ContentionWithKilledHolders(LockTestCase):
    """run-locked holders, some SIGKILLed, never overlap in their critical sections."""

    def test_contention_with_killed_holders_never_overlaps(self):
        # Seconds per backend: the unix socket (Redis over TCP again) is left to
        # NXLOCK_TEST_BACKENDS=all.
        for backend in self.backends(offering="lock", by_default=("file", "redis")):
            with self.subTest(backend=backend.name):
                self.contention_with_killed_holders_never_overlaps(backend)

    def run_contention(self, backend, workers, sections, kill_probability, extra=()):
        """Workers loop on run-locked; a killer SIGKILLs some holders. Returns intervals."""
        log = os.path.join(self.tmp, "sections-%s.log" % backend.name)
        open(log, "w").close()
        kills, done, failures = [], [], []
        stopping = threading.Event()

        def worker():
            for _ in range(sections):
                r = subprocess.run(dying_with_parent([BIN, *backend.args(), "run-locked", "-t",
                                                      "1", "-w", "60", "crit", "sh", "-c",
                                                      SECTION, log, "0.05"]),
                                   env=self.env, capture_output=True, timeout=90)
                # An assertion raised in a thread would only end the thread: report it instead.
                if r.returncode not in (0, -9):
                    failures.append("run-locked exited %d: %s" % (r.returncode, r.stderr))
            done.append(1)

        def killer():
            rng = random.Random(7)
            while not stopping.is_set():
                time.sleep(0.03)  # a bound: how often the killer strikes
                with open(log) as f:
                    lines = f.read().splitlines()
                if lines and lines[-1].startswith("enter") and rng.random() < kill_probability:
                    who = lines[-1].split()[2]
                    try:
                        with open("/proc/%s/stat" % who) as f:
                            holder = int(f.read().rsplit(")", 1)[1].split()[1])
                        with open("/proc/%d/comm" % holder) as f:
                            if f.read().strip() != "nxlock":
                                continue  # gone already (reparented): never a stranger
                        os.kill(holder, signal.SIGKILL)  # the nxlock process, not its watchdog
                        kills.append((who, time.time_ns()))
                    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                        pass

        threads = [threading.Thread(target=worker) for _ in range(workers)]
        killer_thread = threading.Thread(target=killer)
        killer_thread.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        stopping.set()
        killer_thread.join()
        self.assertEqual(failures, [])
        self.assertEqual(len(done), workers, "every worker finishes")
        return parse_sections(log, kills), kills

    def contention_with_killed_holders_never_overlaps(self, backend):
        intervals, kills = self.run_contention(backend, 4, 6, 0.15)
        self.assertEqual(overlaps(intervals), [])
        self.assertEqual(len(intervals), 4 * 6)
        print("\n%s: %d critical sections, %d holders SIGKILLed, 0 overlaps"
              % (backend.name, len(intervals), len(kills)))


class InteropWithThePageClient(LockTestCase):
    """nxlock and a client written from the SETNX page's algorithm share a lock safely."""

    def test_interop_with_a_client_written_from_the_page(self):
        log = os.path.join(self.tmp, "interop.log")
        open(log, "w").close()
        clients = [subprocess.Popen(dying_with_parent([os.path.join(HERE, "setnx_page_client.sh"),
                                                       str(self.redis.port), "shared", "5", "6",
                                                       "sh", "-c", SECTION, log, "0.05"]))
                   for _ in range(2)]
        nxlock_done, failures = [], []

        def nxlock_worker():
            for _ in range(6):
                r = subprocess.run([BIN, "-u", self.redis.url, "run-locked", "-t", "5", "-w", "60",
                                    "shared", "sh", "-c", SECTION, log, "0.05"],
                                   env=self.env, capture_output=True, timeout=90)
                if r.returncode != 0:  # an assertion here would only end the thread
                    failures.append("run-locked exited %d: %s" % (r.returncode, r.stderr))
            nxlock_done.append(1)

        threads = [threading.Thread(target=nxlock_worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        for c in clients:
            self.assertEqual(c.wait(timeout=300), 0)
        self.assertEqual(failures, [])
        intervals = parse_sections(log)
        self.assertEqual(len(nxlock_done), 2)
        self.assertEqual(len(intervals), 24)
        self.assertEqual(overlaps(intervals), [])
        page = sum(1 for i in intervals if i[2].startswith("page-client"))
        print("\ninterop: %d sections (%d page-client, %d nxlock), 0 overlaps"
              % (len(intervals), page, len(intervals) - page))


class FarFutureLockValues(LockTestCase):
    """A waiter on a far-future or overflowing value sleeps; its date prints sanely."""

    values = ("9999999999999", "999999999999999999")

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
    """A SIGTERM between the store write and the printed value loses nothing."""

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
        time.sleep(0.2)  # a bound: the signal is pending before the store lets go
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


if __name__ == "__main__":
    unittest.main()
