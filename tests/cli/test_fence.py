"""Fencing tokens: every acquisition's token is above every earlier one of the key on the
backend; a holder releases or renews only the acquisition it made (exact ownership); servers
that refuse scripts; tokens on a Redis Cluster, the counter in the lock key's slot."""
import json
import os
import signal
import subprocess
import time

from faults import RestartableRedis
from harness import (BIN, COMMAND_TIMEOUT, NxlockTestCase, RedisServer, alive, read, side_key,
                     smoke, wait_for)
from deployments import WithCluster

# Each process's clock starts at this instant (libfaketime's "@"): two processes
# started within the same real second write the same lock timestamp for the same
# ttl. Monotonic time stays real, so renewal intervals and waits are unchanged.
FAKE_START = "@2030-01-01 00:00:00"


def fence_key(key):
    """The counter's key, as nxlock names it (store/keys.hpp)."""
    return side_key(key, "fence")


def url_args(where):
    """The -u arguments for a URL, or for a harness Backend (a quorum has several)."""
    return ["-u", where] if isinstance(where, str) else where.args()


class FenceTestCase(NxlockTestCase):
    def lock_json(self, url, key, *options):
        r = self.nx(*url_args(url), "--json", "lock", *options, key)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def status_json(self, url, key):
        r = self.nx(*url_args(url), "--json", "status", key)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        return json.loads(r.stdout)


class TestTokens(FenceTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.start_redis()

    def test_tokens_strictly_increase_over_many_runs(self):
        # Every invocation opens the store anew, so on the embedded store this
        # also shows the counter surviving reopening.
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                tokens = []
                for i in range(25):
                    got = self.lock_json(backend, "job", "-n", "-t", "30")
                    self.assertTrue(got["acquired"])
                    self.assertEqual(got["value"], str(got["expires_at"]))
                    tokens.append(got["fence"])
                    r = self.nx(*backend.args(), "unlock", "job", got["value"])
                    self.assertEqual(r.returncode, 0, r.stderr)
                    r = self.nx(*backend.args(), "run-locked", "-n", "job",
                                "sh", "-c", 'echo "$NXLOCK_FENCE"')
                    self.assertEqual(r.returncode, 0, r.stderr)
                    tokens.append(int(r.stdout))
                self.assertEqual(len(tokens), 50)
                for earlier, later in zip(tokens, tokens[1:]):
                    self.assertGreater(later, earlier, tokens)
                # Only nxlock took it: the counter is the last holder's token. The
                # embedded store keeps a lock's token in its record, gone with it.
                expected = None if backend.name == "file" else tokens[-1]
                self.assertEqual(self.status_json(backend, "job")["fence"], expected)

    def test_a_takeover_of_an_expired_lock_gets_a_higher_token(self):
        # The crash is played by a page client's GETSET on the lock's own key.
        for backend in self.backends(offering="kv"):
            with self.subTest(backend=backend.name):
                first = self.lock_json(backend, "crashed", "-t", "60")
                # The holder "crashed" long ago: its timestamp is in the past.
                r = self.nx(*backend.args(), "getset", "crashed", "1000000000")
                self.assertEqual(r.stdout.decode().strip(), first["value"])
                taken = self.lock_json(backend, "crashed", "-n", "-t", "60")
                self.assertGreater(taken["fence"], first["fence"])
                r = self.nx(*backend.args(), "get", "crashed")
                self.assertEqual(r.stdout.decode().strip(), taken["value"])
                # run-locked takes it over just the same, and tells its child.
                r = self.nx(*backend.args(), "getset", "crashed", "1000000000")
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.nx(*backend.args(), "run-locked", "-n", "crashed",
                            "sh", "-c", 'echo "$NXLOCK_FENCE"')
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreater(int(r.stdout), taken["fence"])

    @smoke
    def test_status_and_json_show_the_latest_token(self):
        for backend in self.backends(offering="timestamp"):
            with self.subTest(backend=backend.name):
                self.assertIsNone(self.status_json(backend, "s")["fence"])
                r = self.nx(*backend.args(), "lock", "-t", "60", "s")
                # Plain `lock` prints the value alone: scripts capture it.
                self.assertRegex(r.stdout.decode(), r"^[0-9]+\n$")
                value = r.stdout.decode().strip()
                held = self.status_json(backend, "s")
                token = held["fence"]
                self.assertEqual((held["state"], held["value"]), ("held", value))
                self.assertGreaterEqual(token, 1)
                r = self.nx(*backend.args(), "status", "s")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("value %s, fence %d" % (value, token), r.stdout.decode())
                # unlock --force never resets the counter: the next token is higher.
                # (A free lock on the embedded store has no token left to show.)
                r = self.nx(*backend.args(), "unlock", "--force", "s")
                self.assertEqual(r.returncode, 0, r.stderr)
                free = self.status_json(backend, "s")
                self.assertEqual((free["state"], free["fence"]),
                                 ("free", None if backend.name == "file" else token))
                r = self.nx(*backend.args(), "--json", "run-locked", "s", "true")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreater(json.loads(r.stdout)["fence"], token)

    def test_the_counter_lives_beside_the_lock_and_the_value_format_is_unchanged(self):
        got = self.lock_json(self.redis.url + "/1", "deploy", "-t", "60")
        # The documented value: a bare Unix timestamp; the token is elsewhere.
        self.assertEqual(self.redis.cli("-n", "1", "GET", "deploy").strip(),
                         got["value"].encode())
        self.assertEqual(self.redis.cli("-n", "1", "GET", fence_key("deploy")).strip(),
                         str(got["fence"]).encode())

    def test_a_plain_client_of_the_page_interoperates(self):
        # A client that follows the SETNX page with redis-cli alone and never
        # touches the counter, taking turns with nxlock on one key.
        url = self.redis.url + "/1"

        def page(*args):
            return self.redis.cli("-n", "1", *args).strip().decode()

        now = int(time.time())
        self.assertEqual(page("SETNX", "shared", str(now + 60)), "1")
        r = self.nx("-u", url, "lock", "-n", "shared")
        self.assertEqual(r.returncode, 75, r.stderr)  # held by the page client
        self.assertEqual(page("GET", "shared"), str(now + 60))
        # The page client crashed; its lock expired. nxlock takes it over by GETSET.
        self.assertEqual(page("SET", "shared", str(now - 5)), "OK")
        first = self.lock_json(url, "shared", "-n", "-t", "30")
        # The page client sees a held lock in the documented format.
        current = page("GET", "shared")
        self.assertEqual(current, first["value"])
        self.assertGreaterEqual(int(current), now)
        self.assertEqual(page("SETNX", "shared", str(now + 60)), "0")
        r = self.nx("-u", url, "unlock", "shared", first["value"])
        self.assertEqual(r.returncode, 0, r.stderr)
        # The page client takes it, takes it over from an expired nxlock lock by
        # GETSET, and releases with DEL; the counter never moves for it.
        self.assertEqual(page("SETNX", "shared", str(now + 60)), "1")
        self.assertEqual(page("DEL", "shared"), "1")
        second = self.lock_json(url, "shared", "-n", "-t", "1")
        self.assertEqual(page("SET", "shared", str(now - 5)), "OK")  # nxlock's lock expired
        self.assertEqual(page("GETSET", "shared", str(now + 60)), str(now - 5))
        self.assertEqual(page("GET", fence_key("shared")), str(second["fence"]))
        r = self.nx("-u", url, "lock", "-n", "shared")
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertEqual(page("DEL", "shared"), "1")
        third = self.lock_json(url, "shared", "-n")
        self.assertLess(first["fence"], second["fence"])
        self.assertLess(second["fence"], third["fence"])


class TestTokensSurviveRestarts(FenceTestCase):
    def test_a_redis_restart_with_its_data_keeps_the_counter(self):
        server = RestartableRedis()
        self.addCleanup(server.close)
        first = self.lock_json(server.url, "k", "-t", "60")
        r = self.nx("-u", server.url, "unlock", "k", first["value"])
        self.assertEqual(r.returncode, 0, r.stderr)
        # SHUTDOWN SAVE writes the dump even with no save points; the server
        # then exits on its own, and loads the dump when it starts again.
        subprocess.run(["redis-cli", "-p", str(server.port), "SHUTDOWN", "SAVE"],
                       capture_output=True, timeout=COMMAND_TIMEOUT)
        server.process.wait(timeout=COMMAND_TIMEOUT)
        self.assertTrue(os.path.exists(os.path.join(server.dir, "dump.rdb")))
        self.assertTrue(server.start())
        self.assertEqual(server.get(fence_key("k")), str(first["fence"]).encode())
        second = self.lock_json(server.url, "k", "-t", "60")
        self.assertGreater(second["fence"], first["fence"])

    def test_the_file_store_keeps_the_counter_in_its_files(self):
        url = "file://" + self.store_path
        first = self.lock_json(url, "k", "-t", "60")
        r = self.nx("-u", url, "unlock", "--force", "k")
        self.assertEqual(r.returncode, 0, r.stderr)
        # The same path, reopened, continues above it; so does a new store (its
        # tokens start at the clock in microseconds, not at 1).
        self.assertGreater(self.lock_json(url, "k")["fence"], first["fence"])
        other = self.lock_json("file://" + os.path.join(self.tmp, "other"), "k")
        self.assertGreater(other["fence"], first["fence"])


class TestExactOwnership(FenceTestCase):
    """A holds the lock; `unlock --force`; B takes it within the
    same second, and writes A's very timestamp. A must find its lock lost, and B keep it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.start_redis()

    def run_locked_at_fake_start(self, url, name, seconds):
        out = os.path.join(self.tmp, name)
        # Under AddressSanitizer (scripts/test) libfaketime is preloaded ahead of
        # the ASan runtime, which it otherwise refuses.
        asan = ":".join(filter(None, [self.env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        env = dict(self.env, FAKETIME_DONT_FAKE_MONOTONIC="1", ASAN_OPTIONS=asan)
        # --clock local: the lock decisions use the (faked) caller's clock on Redis too.
        p = subprocess.Popen(
            ["faketime", "-f", FAKE_START, BIN, *url_args(url), "run-locked", "--clock", "local",
             "-n", "-t", "30", "--kill-after", "2", "same",
             "sh", "-c", 'echo "$NXLOCK_VALUE ${NXLOCK_FENCE:-0}" > "$0"; sleep "$1"', out,
             str(seconds)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.assertTrue(wait_for(lambda: len(read(out).split()) == 2, timeout=20),
                        "%s did not start its job" % name)
        value, fence = read(out).split()
        return p, value, int(fence)

    def test_same_timestamp_after_a_forced_unlock(self):
        # Seconds long: by default on the embedded store and Redis over TCP.
        for backend in self.backends(offering="kv", by_default=("file", "redis")):
            with self.subTest(backend=backend.name):
                # ttl 30: renewals every 10 s, time enough for B to start first.
                a, a_value, a_fence = self.run_locked_at_fake_start(
                    backend, "a-" + backend.name, 60)
                r = self.nx(*backend.args(), "unlock", "--force", "same")
                self.assertEqual(r.returncode, 0, r.stderr)
                b, b_value, b_fence = self.run_locked_at_fake_start(
                    backend, "b-" + backend.name, 14)
                # The premise: the same lock value, two acquisitions.
                self.assertEqual(a_value, b_value)

                # B renews past A's first renewal (10 s in), keeps its lock, finishes
                # its job and releases.
                _, b_err = b.communicate(timeout=40)
                self.assertEqual(b.returncode, 0, b_err)
                self.assertNotIn(b"lost", b_err)
                r = self.nx(*backend.args(), "get", "same")
                self.assertEqual(r.returncode, 1, r.stdout)
                # A's renewal found the counter moved on: lost, its job stopped.
                _, a_err = a.communicate(timeout=40)
                self.assertEqual(a.returncode, 79, a_err)
                self.assertIn(b"taken over by another value", a_err)
                self.assertGreater(b_fence, a_fence)


class TestPausedHolder(FenceTestCase):
    """A holder paused (SIGSTOP) past its expiry: another takes the lock with a higher
    token; the resumed holder cannot renew, release or act as holder."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.start_redis()

    @smoke
    def test_a_paused_holder_loses_to_its_successor(self):
        for backend in self.backends(offering="lock", by_default=("file", "redis")):
            with self.subTest(backend=backend.name):
                out = os.path.join(self.tmp, "paused-" + backend.name)
                stopped = os.path.join(self.tmp, "stopped-" + backend.name)
                a = self.popen(*backend.args(), "run-locked", "-t", "3", "--kill-after", "2",
                               "paused", "sh", "-c",
                               'echo "$NXLOCK_FENCE" > "$0"; trap "echo TERM > $1; exit 143" TERM; '
                               'while :; do sleep 0.1; done', out, stopped,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                self.addCleanup(lambda: a.poll() is None and a.kill())
                self.assertTrue(wait_for(lambda: read(out).strip() != "", timeout=20))
                a_fence = int(read(out))
                self.assertGreater(a_fence, 0)
                # Stopped between its store steps: once its holder record is written,
                # and well before its first renewal (a second in). Stopped inside
                # one, it would keep the embedded store's stripe lock, and every
                # other client of that stripe would wait for it, as they must.
                # On a quorum, once the record is on each of its servers.
                self.assertTrue(wait_for(
                    lambda: "holder" in self.status_json(backend, "paused") and
                    (backend.name != "quorum" or
                     all(cli("GET", side_key("paused", "holder")).strip()
                         for cli in backend.servers)), timeout=20))
                # A bound: the holder write seen above has ended by then (nothing shows its end).
                time.sleep(0.15)
                os.kill(a.pid, signal.SIGSTOP)  # nxlock alone: its job runs on
                try:
                    # Expired while paused: its value is ttl + 1 s after it was taken.
                    self.assertTrue(wait_for(
                        lambda: self.nx(*backend.args(), "status", "paused").returncode == 1,
                        timeout=20), "the paused holder's lock did not expire")
                    b = self.lock_json(backend, "paused", "-n", "-t", "60")
                    self.assertGreater(b["fence"], a_fence)
                finally:
                    os.kill(a.pid, signal.SIGCONT)
                _, err = a.communicate(timeout=30)
                self.assertEqual(a.returncode, 79, err)
                self.assertIn(b"lost", err)
                self.assertEqual(read(stopped).strip(), "TERM")  # --on-lost term
                # It renewed nothing and released nothing: B's lock is intact (in every
                # copy of the key: each server of a quorum).
                if "timestamp" in backend.offers:
                    self.assertEqual(backend.values("paused"), [b["value"]] * backend.copies)
                status = self.status_json(backend, "paused")
                self.assertEqual((status["state"], status["value"], status["fence"]),
                                 ("held", b["value"], b["fence"]))


class TestServersThatRefuseScripts(FenceTestCase):
    """nxlock's lock steps are scripts, so a server that refuses
    EVAL is found out by the acquisition itself, before any job starts."""

    def assertNothingStartedOrLeft(self, server, result, status, *words):
        self.assertOneLineError(result, status, "EVAL", *words)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "ran")))
        self.assertEqual(server.cli("KEYS", "*").strip(), b"")

    def test_eval_renamed_away_is_69(self):
        server = RedisServer(extra=["--rename-command", "EVAL", ""])
        self.addCleanup(server.stop)
        r = self.nx("-u", server.url, "run-locked", "-n", "job", "touch",
                    os.path.join(self.tmp, "ran"))
        self.assertNothingStartedOrLeft(server, r, 69, "does not know EVAL")
        r = self.nx("-u", server.url, "lock", "-n", "job")
        self.assertNothingStartedOrLeft(server, r, 69)
        self.assertEqual(r.stdout, b"")

    def test_an_acl_user_without_eval_is_77(self):
        server = RedisServer()
        self.addCleanup(server.stop)
        server.cli("ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha")
        url = "redis://u:pw@127.0.0.1:%d" % server.port
        r = self.nx("-u", url, "run-locked", "-n", "job", "touch", os.path.join(self.tmp, "ran"))
        self.assertNothingStartedOrLeft(server, r, 77, "may not run EVAL")
        self.assertNotIn(b"pw@", r.stderr)
        r = self.nx("-u", url, "lock", "-n", "job")
        self.assertNothingStartedOrLeft(server, r, 77)


class TestSentinelTokens(FenceTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from sentinel_harness import Deployment
        cls.deployment = Deployment()
        cls.addClassCleanup(cls.deployment.stop)

    def test_tokens_through_sentinel_reach_the_replica_with_the_lock(self):
        from sentinel_harness import cli
        url = self.deployment.url()
        tokens = []
        for _ in range(3):
            got = self.lock_json(url, "s", "--replicas", "1", "-n", "-t", "30")
            tokens.append(got["fence"])
            # --replicas 1: the script's writes, lock and counter, are on the replica.
            replica = self.deployment.replica.port
            self.assertEqual(cli(replica, "GET", "s").strip(), got["value"])
            self.assertEqual(cli(replica, "GET", fence_key("s")).strip(), str(got["fence"]))
            r = self.nx("-u", url, "--replicas", "1", "run-locked", "-n", "s", "sh", "-c",
                        'echo "$NXLOCK_FENCE"')
            self.assertEqual(r.returncode, 75, r.stderr)  # still held
            r = self.nx("-u", url, "getset", "s", "1000000000")  # as if it expired
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.nx("-u", url, "--replicas", "1", "run-locked", "-n", "s", "sh", "-c",
                        'echo "$NXLOCK_FENCE"')
            self.assertEqual(r.returncode, 0, r.stderr)
            tokens.append(int(r.stdout))
        self.assertEqual(len(tokens), 6)
        self.assertEqual(tokens, sorted(set(tokens)))  # strictly rising


class TestClusterTokens(WithCluster, FenceTestCase):

    def test_tokens_increase_for_keys_on_every_node(self):
        from sentinel_harness import cli
        seed = self.cluster.url(self.cluster.nodes[0])
        for node in self.cluster.nodes:
            for key in (self.cluster.key_on(node, "fenced"), "{%s}.tagged" % node.port):
                with self.subTest(node=node.port, key=key):
                    tokens = []
                    for _ in range(3):
                        got = self.lock_json(seed, key, "-n", "-t", "30")
                        tokens.append(got["fence"])
                        r = self.nx("-u", seed, "unlock", key, got["value"])
                        self.assertEqual(r.returncode, 0, r.stderr)
                        r = self.nx("-u", seed, "run-locked", "-n", key, "sh", "-c",
                                    'echo "$NXLOCK_FENCE"')
                        self.assertEqual(r.returncode, 0, r.stderr)
                        tokens.append(int(r.stdout))
                    self.assertEqual(tokens, sorted(set(tokens)))
                    # The counter lives on the lock key's node, in its slot.
                    owner = self.cluster.owner(key)
                    self.assertEqual(cli(owner.port, "GET", fence_key(key)).strip(),
                                     str(tokens[-1]))
                    self.assertEqual(self.status_json(seed, key)["fence"], tokens[-1])

    def test_a_key_whose_counter_cannot_share_its_slot_is_64(self):
        seed = self.cluster.url(self.cluster.nodes[0])
        for key in ("a}b", "x{}y"):
            with self.subTest(key=key):
                r = self.nx("-u", seed, "lock", "-n", key)
                self.assertOneLineError(r, 64, key, "cannot share its hash slot", "hash tag")
                r = self.nx("-u", seed, "run-locked", "-n", key, "touch",
                            os.path.join(self.tmp, "ran"))
                self.assertOneLineError(r, 64, "hash tag")
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "ran")))
                r = self.nx("-u", seed, "get", key)
                self.assertEqual(r.returncode, 1, r.stderr)  # nothing left behind
        # Named as the message says, it works.
        got = self.lock_json(seed, "{a}b", "-n")
        self.assertGreaterEqual(got["fence"], 1)
