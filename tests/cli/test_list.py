"""nxlock list [PATTERN]: the locks held now, on every backend (harness.backends), and
keys on every node of a Redis Cluster."""
import json
import os
import socket
import subprocess
import time
import unittest

from harness import BIN, NxlockTestCase, side_key, smoke, wait_for
from deployments import WithCluster


class ListCase(NxlockTestCase):
    def listed(self, url, *args):
        """`list --json` on `url`: its rows, after checking the one-object shape and exit 0."""
        r = self.nx(*url, "--json", "list", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1, r.stdout)
        out = json.loads(lines[0])
        self.assertEqual(out["exit_status"], 0)
        self.assertIsInstance(out["now"], int)
        return out["locks"]

    def keys(self, url, *args):
        return [row["key"] for row in self.listed(url, *args)]

    def lock(self, url, key, ttl=60):
        r = self.nx(*url, "lock", "-n", "-t", str(ttl), key)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().strip()


class TestList(ListCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_nothing_held_lists_nothing_and_exits_0(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                r = self.nx(*backend.args(), "list")
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
                self.assertEqual(self.listed(backend.args()), [])
        # An embedded store that does not exist lists nothing and is not created.
        self.assertFalse(os.path.exists(self.store_path))

    def test_a_held_lock_with_its_holder_token_and_expiry(self):
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                value = self.lock(url, "job")
                rows = self.listed(url)
                # The keys beside the lock (holder record, counter) are no rows.
                self.assertEqual(len(rows), 1, rows)
                row = rows[0]
                self.assertEqual((row["key"], row["value"], row["state"]), ("job", value, "held"))
                self.assertEqual(row["expires_at"], int(value))
                self.assertTrue(0 < row["seconds_left"] <= 62, row)
                # `lock` records the process that asked: this test.
                self.assertEqual(row["holder"]["pid"], os.getpid())
                self.assertEqual(row["acquired_at"], row["holder"]["acquired_at"])
                status = json.loads(self.nx(*url, "--json", "status", "job").stdout)
                self.assertEqual(row["fence"], status["fence"])
                self.assertEqual(row["waiters"], 0)
                self.assertIs(row["hold"], False)
                self.assertNotIn("slot", row)

                text = self.nx(*url, "list").stdout.decode().splitlines()
                self.assertEqual(len(text), 2, text)
                # A quorum adds how many servers hold each lock.
                servers = ["SERVERS"] if backend.name == "quorum" else []
                self.assertEqual(text[0].split(), ["KEY", "HOLDER", "SINCE", "UNTIL", "FENCE",
                                                   "WAITERS", "STATE", *servers, "COMMAND"])
                self.assertTrue(text[1].startswith("job "), text)
                self.assertIn("pid %d on " % os.getpid(), text[1])
                self.assertIn(str(status["fence"]), text[1])
                self.assertIn(" held", text[1])
                # Columns line up: each header starts where its cells start.
                self.assertEqual(text[0].index("FENCE"), text[1].index(str(status["fence"])))

    @smoke
    def test_a_pattern_is_a_glob_on_the_key(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                for key in ("backup-db", "backup-www", "deploy", "xbackup-"):
                    self.lock(url, key)
                self.assertEqual(self.keys(url, "backup-*"), ["backup-db", "backup-www"])
                self.assertEqual(self.keys(url, "?eploy"), ["deploy"])
                self.assertEqual(self.keys(url, "backup-[d]*"), ["backup-db"])
                self.assertEqual(self.keys(url, "nothing*"), [])
                self.assertEqual(len(self.keys(url)), 4)

    def test_keys_that_hold_no_lock_are_not_listed(self):
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                self.assertEqual(self.nx(*url, "setnx", "name", "not a timestamp").returncode, 0)
                self.assertEqual(self.keys(url), [])

    def test_expired_locks_only_with_expired(self):
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                # Abandoned: a page client's lock whose timestamp passed long ago.
                past = str(int(time.time()) - 100)
                self.assertEqual(self.nx(*url, "setnx", "stale", past).returncode, 0)
                self.lock(url, "fresh")
                self.assertEqual(self.keys(url), ["fresh"])
                rows = self.listed(url, "--expired")
                self.assertEqual([r["key"] for r in rows], ["fresh", "stale"])
                self.assertEqual((rows[1]["state"], rows[1]["value"]), ("expired", past))
                self.assertNotIn("seconds_left", rows[1])
                self.assertIsNone(rows[1]["holder"])
                text = self.nx(*url, "list", "--expired").stdout.decode()
                self.assertRegex(text, r"(?m)^stale .* expired")

    def test_a_holder_that_is_gone_says_so(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                # `lock` records the shell that asked, which has exited since.
                shell = subprocess.run(["sh", "-c", '"$0" "$@" >/dev/null', BIN, *url,
                                        "lock", "-t", "60", "gone"], env=self.env, timeout=30)
                self.assertEqual(shell.returncode, 0)
                row = self.listed(url)[0]
                self.assertEqual(row["state"], "gone")
                self.assertIs(row["holder"]["running"], False)
                self.assertRegex(self.nx(*url, "list").stdout.decode(), r"(?m)^gone .* gone ")

    def test_a_hold_after_the_job_is_shown_as_hold(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                r = self.nx(*url, "run-locked", "-n", "--hold", "60", "nightly", "true")
                self.assertEqual(r.returncode, 0, r.stderr)
                row = self.listed(url)[0]
                self.assertEqual((row["key"], row["state"], row["hold"]), ("nightly", "hold", True))
                self.assertIn("finished_at", row["holder"])
                self.assertEqual(row["holder"]["command"], "true")

    def test_a_slot_is_listed_under_its_locks_key(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                taken = []
                for _ in range(3):
                    r = self.nx(*url, "lock", "-n", "--slots", "3", "backup")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    taken.append(r.stdout.decode().strip())
                r = self.nx(*url, "unlock", "backup", taken[1])  # slot 2 frees
                self.assertEqual(r.returncode, 0, r.stderr)
                self.lock(url, "deploy")
                rows = self.listed(url)
                self.assertEqual([(r["key"], r.get("slot")) for r in rows],
                                 [("backup", 1), ("backup", 3), ("deploy", None)])
                # The pattern is on the lock's key, and finds its slots.
                self.assertEqual([r.get("slot") for r in self.listed(url, "back*")], [1, 3])
                text = self.nx(*url, "list").stdout.decode().splitlines()
                self.assertEqual(text[0].split()[:2], ["KEY", "SLOT"])
                self.assertEqual(text[1].split()[:2], ["backup", "1"])
                self.assertEqual(text[3].split()[:2], ["deploy", "-"])

    def test_slot_holders_are_listed_as_slots(self):
        # Beside a lock of shared holders: each kind is its own state, and the
        # SHARED column counts shared holders alone.
        for backend in self.backends(offering=("slots", "shared")):
            with self.subTest(backend=backend.name):
                url = backend.args()
                for options, key in ((("--slots", "3"), "pool"), (("--slots", "3"), "pool"),
                                     (("--shared",), "sh")):
                    r = self.nx(*url, "lock", "-n", *options, key)
                    self.assertEqual(r.returncode, 0, r.stderr)
                rows = self.listed(url)
                self.assertEqual([(row["key"], row.get("slot"), row["state"],
                                   row["shared_holders"], row.get("slots_held"))
                                  for row in rows],
                                 [("pool", 1, "slots", 0, 2), ("pool", 2, "slots", 0, 2),
                                  ("sh", None, "shared", 1, None)], rows)
                text = self.nx(*url, "list").stdout.decode().splitlines()
                shared_at, state_at = text[0].index("SHARED"), text[0].index("STATE")
                cells = [(line.split()[0], line[shared_at:state_at].strip(),
                          line[state_at:].split()[0]) for line in text[1:]]
                self.assertEqual(cells, [("pool", "-", "slots"), ("pool", "-", "slots"),
                                         ("sh", "1", "shared")], text)

    def test_the_prefix_applies(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                self.lock([*url, "--prefix", "app*:"], "job")
                self.lock(url, "app-job")
                self.assertEqual(self.keys([*url, "--prefix", "app*:"]), ["app*:job"])
                self.assertEqual(self.keys([*url, "--prefix", "app*:"], "j*"), ["app*:job"])
                self.assertEqual(self.keys([*url, "--prefix", "app*:"], "x*"), [])

    def test_each_shared_holder_is_a_row(self):
        for backend in self.backends(offering="shared"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                taken = []
                for _ in range(2):
                    r = self.nx(*url, "--json", "lock", "--shared", "-n", "-t", "60", "sh")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    taken.append(json.loads(r.stdout))
                self.lock(url, "ex")
                rows = self.listed(url)
                self.assertEqual([row["key"] for row in rows], ["ex", "sh", "sh"])
                self.assertEqual((rows[0]["state"], rows[0]["shared_holders"]), ("held", 0))
                shared = sorted(rows[1:], key=lambda row: row["fence"])
                for row, got in zip(shared, taken):
                    self.assertEqual((row["state"], row["shared_holders"]), ("shared", 2))
                    # Its own lease: the value unlock takes, its expiry, its token, its holder.
                    self.assertEqual(row["value"], got["value"])
                    self.assertEqual(row["expires_at"], int(got["value"].split(":")[0]))
                    self.assertEqual(row["fence"], got["fence"])
                    self.assertEqual(row["holder"]["pid"], os.getpid())
                    self.assertEqual(row["acquired_at"], row["holder"]["acquired_at"])

                text = self.nx(*url, "list").stdout.decode().splitlines()
                self.assertEqual(text[0].split(), ["KEY", "HOLDER", "SINCE", "UNTIL", "FENCE",
                                                   "WAITERS", "SHARED", "STATE", "COMMAND"])
                # Cells under the SHARED and STATE titles (columns are padded to their titles).
                shared_at, state_at = text[0].index("SHARED"), text[0].index("STATE")
                cells = [(line.split()[0], line[shared_at:state_at].strip(),
                          line[state_at:].split()[0]) for line in text[1:]]
                self.assertEqual(cells, [("ex", "-", "held"), ("sh", "2", "shared"),
                                         ("sh", "2", "shared")], text)
                for line in text[2:]:
                    self.assertIn("pid %d on " % os.getpid(), line)

                status = self.nx(*url, "--json", "status", "sh")
                self.assertEqual(status.returncode, 0, status.stderr)
                self.assertEqual(sorted(h["fence"] for h in json.loads(status.stdout)["shared"]),
                                 [got["fence"] for got in taken])
                status = self.nx(*url, "status", "sh").stdout.decode()
                self.assertEqual(status.count("shared holder: pid %d on " % os.getpid()), 2,
                                 status)

                if backend.name == "redis":
                    # The details beside the leases expire with them, as every key nxlock writes.
                    details = side_key(side_key("sh", "shared"), "holder")
                    # One field per holder, and the token of the set's latest take.
                    fields = self.redis.cli("-n", "1", "HKEYS", details).decode().split()
                    self.assertEqual(sorted(fields), sorted(["@fence"] + [got["value"].split(":")[1]
                                                                          for got in taken]))
                    leases_ttl = int(self.redis.cli("-n", "1", "PTTL", side_key("sh", "shared")))
                    details_ttl = int(self.redis.cli("-n", "1", "PTTL", details))
                    self.assertTrue(0 < details_ttl <= leases_ttl, (details_ttl, leases_ttl))

                # One let go: its row goes; the last one frees the key, and its details go too.
                r = self.nx(*url, "unlock", "sh", taken[0]["value"])
                self.assertEqual(r.returncode, 0, r.stderr)
                rows = self.listed(url, "sh")
                self.assertEqual([(row["value"], row["shared_holders"]) for row in rows],
                                 [(taken[1]["value"], 1)])
                r = self.nx(*url, "unlock", "sh", taken[1]["value"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.keys(url, "sh"), [])
                if backend.name == "redis":
                    self.assertEqual(self.redis.cli("-n", "1", "EXISTS", details).strip(), b"0")

    def test_live_waiters_are_counted(self):
        for backend in self.backends(offering="queue"):
            with self.subTest(backend=backend.name):
                url = backend.args()
                self.lock(url, "busy")
                waiter = self.popen(*url, "lock", "-w", "60", "busy",
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.addCleanup(lambda w=waiter: w.poll() is None and (w.kill(), w.wait()))
                self.assertTrue(wait_for(lambda: self.listed(url)[0]["waiters"] == 1, 20))
                waiter.kill()
                waiter.wait()

    def test_waiters_lists_each_waiter(self):
        # Who waits: pid, host, since when and kind, in the order they came;
        # a waiter of an older nxlock (its ticket "q" + 16 hex digits) is listed
        # as one that tells nothing more.
        host = socket.gethostname()
        for backend in self.backends(offering=("queue", "shared", "slots")):
            with self.subTest(backend=backend.name):
                url = backend.args()
                self.lock(url, "busy")
                self.assertEqual(self.nx(*url, "lock", "--slots", "1", "sem").returncode, 0)
                started = int(time.time())
                waiters = []
                for args, key, count in ((("-w", "60"), "busy", 1),
                                         (("--shared", "-w", "60"), "busy", 2),
                                         (("--slots", "1", "-w", "60"), "sem", 1)):
                    w = self.popen(*url, "lock", *args, key,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    self.addCleanup(lambda w=w: w.poll() is None and (w.kill(), w.wait()))
                    waiters.append(w)
                    queue = side_key(key, "queue")
                    self.assertTrue(wait_for(lambda: self.queued(backend, queue) == count, 20))
                self.plant_old_waiter(backend, side_key("busy", "queue"))
                rows = {row["key"]: row for row in self.listed(url, "--waiters")}
                self.assertEqual(rows["busy"]["waiters"], 3, rows)
                listed = rows["busy"]["waiting"]
                self.assertEqual([(w["pid"], w["host"], w["kind"]) for w in listed],
                                 [(waiters[0].pid, host, "exclusive"),
                                  (waiters[1].pid, host, "shared"), (None, None, None)])
                for w in listed[:2]:
                    self.assertTrue(started - 1 <= w["since"] <= time.time() + 1, w)
                self.assertEqual([(w["pid"], w["kind"]) for w in rows["sem"]["waiting"]],
                                 [(waiters[2].pid, "slots")])
                # Without --waiters, the count alone, as before.
                self.assertNotIn("waiting", self.listed(url)[0])
                text = self.nx(*url, "list", "--waiters").stdout.decode()
                lines = text.splitlines()
                busy = next(i for i, l in enumerate(lines) if l.startswith("busy "))
                self.assertRegex(lines[busy + 1], r"^  waiter 1: pid %d on %s, exclusive, waiting "
                                 r"since .* \(\d+s\)$" % (waiters[0].pid, host))
                self.assertRegex(lines[busy + 2], r"^  waiter 2: pid %d on %s, shared, "
                                 % (waiters[1].pid, host))
                self.assertRegex(lines[busy + 3], r"^  waiter 3: a waiter of an older nxlock")
                sem = next(i for i, l in enumerate(lines) if l.startswith("sem "))
                self.assertRegex(lines[sem + 1], r"^  waiter 1: pid %d on %s, slots, "
                                 % (waiters[2].pid, host))
                for w in waiters:
                    w.kill()
                    w.wait()

    def plant_old_waiter(self, backend, queue):
        """Puts a waiter of an older nxlock in line, as its steps wrote it: a ticket of
        "q" and 16 hex digits, with the arrival and the live lease of the last waiter."""
        old = "q0123456789abcdef"
        if backend.name == "file":
            text = self.nx("get", queue).stdout.decode()[:-1]  # get adds a newline
            line = text.splitlines()[-1].split(" ")  # ticket arrival lease boot
            line[2] = str(int(line[2]) + 60_000_000)  # a lease that outlasts the test
            text += " ".join([old] + line[1:]) + "\n"
            self.assertEqual(self.nx("getset", queue, text).returncode, 0)
            return
        leases = side_key(queue, "lease")
        seconds, micros = (int(x) for x in backend.redis_cli("TIME").split())
        now = seconds * 1_000_000 + micros
        backend.redis_cli("ZADD", queue, str(now), old)
        backend.redis_cli("ZADD", leases, str(now + 60_000_000), old)

    def test_a_live_run_locked_keeps_its_lock_held_whatever_the_clock(self):
        # The embedded store: a live owner keeps its lock held past a timestamp
        # that a caller's clock (two hours ahead here) calls expired.
        job = self.popen("run-locked", "-t", "60", "owned", "sleep", "60",
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: job.poll() is None and (job.kill(), job.wait()))
        self.assertTrue(wait_for(lambda: b"holder:" in self.nx("status", "owned").stdout, 20))
        env = dict(self.env, FAKETIME_DONT_FAKE_MONOTONIC="1",
                   ASAN_OPTIONS=":".join(filter(None, [self.env.get("ASAN_OPTIONS"),
                                                       "verify_asan_link_order=0"])))
        r = subprocess.run(["faketime", "-f", "+2h", BIN, "--json", "list"], env=env,
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout)["locks"]
        self.assertEqual([(row["key"], row["state"]) for row in rows], [("owned", "held")])
        job.kill()
        job.wait()

    def test_bad_options_are_usage_errors(self):
        for args in (["list", "--nope"], ["list", "a", "b"], ["list", "-x"]):
            with self.subTest(args=args):
                self.assertOneLineError(self.nx(*args), 64)

    def test_an_unreachable_server_is_69(self):
        r = self.nx("-u", "redis://127.0.0.1:1", "--io-timeout", "1", "list")
        self.assertOneLineError(r, 69, "127.0.0.1:1")

    def test_a_quorum_lists_what_a_majority_holds(self):
        url = ["-u", self.redis.url + "/3", "-u", self.redis.url + "/4", "-u",
               self.redis.url + "/5"]
        self.lock(url, "q")
        # Held on one server alone: no lock of the quorum's.
        self.assertEqual(self.nx("-u", self.redis.url + "/3", "setnx", "minority",
                                 str(int(time.time()) + 60)).returncode, 0)
        rows = self.listed(url)
        self.assertEqual([(r["key"], r["servers_holding"]) for r in rows], [("q", 3)])
        self.assertIn("SERVERS", self.nx(*url, "list").stdout.decode())


class TestListOnACluster(WithCluster, ListCase):
    def test_locks_on_every_master_through_one_seed(self):
        url = ["-u", self.cluster.url(self.cluster.nodes[0])]
        keys = sorted(self.cluster.key_on(node, "job") for node in self.cluster.masters())
        self.assertEqual(len(set(self.cluster.owner(k).port for k in keys)), 3)
        for key in keys:
            self.lock(url, key)
        for _ in range(2):
            self.assertEqual(self.nx(*url, "lock", "-n", "--slots", "2", "pool").returncode, 0)
        rows = self.listed(url)
        self.assertEqual([(r["key"], r.get("slot")) for r in rows],
                         sorted([(k, None) for k in keys] + [("pool", 1), ("pool", 2)],
                                key=lambda kv: (kv[0], kv[1] or -1)))
        for row in rows:
            if "slot" not in row:
                self.assertEqual(row["holder"]["pid"], os.getpid())
                self.assertIsInstance(row["fence"], int)
        self.assertEqual(self.keys(url, "pool"), ["pool", "pool"])  # a row per slot
        self.assertEqual(self.keys(url, keys[0]), [keys[0]])


if __name__ == "__main__":
    unittest.main()
