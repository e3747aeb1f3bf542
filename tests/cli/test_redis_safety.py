"""Safety under production faults on Redis: tokens that never go back after data loss, servers
that may evict locks, side keys that never collide, a deleted counter is not a lost lock, and
no takeover on a clock estimate that a slow TIME reply ran ahead of the server. (That nothing
piles up, on every backend: test_nothing_piles_up.py.)"""
import json
import os
import subprocess
import time

from faults import DelayedTimeProxy, RestartableRedis
from harness import COMMAND_TIMEOUT, NxlockTestCase, side_key, wait_for


class RedisSafetyCase(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.start_redis()

    def lock_json(self, url, key, *options):
        r = self.nx("-u", url, "--json", "lock", *options, key)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def cli(self, *args):
        return self.redis.cli(*args).decode().strip()


class TestTokensAfterDataLoss(RedisSafetyCase):
    def round(self, url, key="job"):
        got = self.lock_json(url, key, "-n", "-t", "30")
        r = self.nx("-u", url, "unlock", key, got["value"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return got["fence"]

    def test_a_token_rises_after_flushall_and_after_the_counter_is_deleted(self):
        url = self.redis.url
        before = [self.round(url) for _ in range(3)]
        self.assertEqual(before, sorted(set(before)))
        # 16 digits: the server's clock in microseconds, not a count from 1.
        self.assertGreaterEqual(len(str(before[0])), 16)
        self.cli("FLUSHALL")
        after_flush = self.round(url)
        self.assertGreater(after_flush, before[-1])
        self.cli("DEL", side_key("job", "fence"))
        after_del = self.round(url)
        self.assertGreater(after_del, after_flush)

    def test_a_token_rises_after_a_restart_without_persistence(self):
        server = RestartableRedis()
        self.addCleanup(server.close)
        first = [self.round(server.url) for _ in range(2)]
        server.restart()
        self.assertIsNone(server.get(side_key("job", "fence")) or None)  # the counter is gone
        self.assertGreater(self.round(server.url), first[-1])

    def test_a_deleted_counter_does_not_stop_a_running_job(self):
        url = self.redis.url
        job = self.popen("-u", url, "run-locked", "-t", "2", "job", "sleep", "4",
                         stderr=subprocess.PIPE)
        self.assertTrue(wait_for(lambda: self.cli("EXISTS", "job") == "1"))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            # The counter, under its name and under the one older versions gave it.
            self.cli("DEL", side_key("job", "fence"), "{job}:fence")
            time.sleep(0.3)  # the deletions' interval; the deadline bounds the loop
        _, err = job.communicate(timeout=COMMAND_TIMEOUT + 10)
        self.assertEqual(job.returncode, 0, err)
        self.assertNotIn(b"taken over", err)


class TestSideKeys(RedisSafetyCase):
    def test_lock_x_and_lock_brace_x_are_independent(self):
        url = self.redis.url
        job = self.popen("-u", url, "run-locked", "-t", "2", "x", "sleep", "3",
                         stderr=subprocess.PIPE)
        self.assertTrue(wait_for(lambda: self.cli("EXISTS", "x") == "1"))
        for _ in range(5):
            got = self.lock_json(url, "{x}", "-n", "-t", "1")
            r = self.nx("-u", url, "unlock", "{x}", got["value"])
            self.assertEqual(r.returncode, 0, r.stderr)
        _, err = job.communicate(timeout=COMMAND_TIMEOUT + 10)
        self.assertEqual(job.returncode, 0, err)
        self.assertNotEqual(side_key("x", "fence"), side_key("{x}", "fence"))

    def test_a_lock_named_like_a_side_key_cannot_stop_a_running_job(self):
        url = self.redis.url
        job = self.popen("-u", url, "run-locked", "-t", "2", "y", "sleep", "3",
                         stderr=subprocess.PIPE)
        self.assertTrue(wait_for(lambda: self.cli("EXISTS", "y") == "1"))
        # Its holder details are written just after.
        self.assertTrue(wait_for(lambda: self.cli("EXISTS", side_key("y", "holder")) == "1"))
        for suffix in ("fence", "holder", "queue"):
            # The names of today: refused, they would write y's own keys.
            r = self.nx("-u", url, "lock", "-n", "-t", "1", side_key("y", suffix))
            self.assertOneLineError(r, 64, "companion")
            # The names of older versions: locks like any other now.
            old_name = "{y}:" + suffix
            got = self.lock_json(url, old_name, "-n", "-t", "1")
            r = self.nx("-u", url, "unlock", old_name, got["value"])
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("-u", url, "run-locked", "-n", side_key("y", "fence"), "true")
        self.assertEqual(r.returncode, 64, r.stderr)
        _, err = job.communicate(timeout=COMMAND_TIMEOUT + 10)
        self.assertEqual(job.returncode, 0, err)


class TestEvictingServers(RedisSafetyCase):
    def config(self, maxmemory, policy):
        self.cli("CONFIG", "SET", "maxmemory", maxmemory)
        self.cli("CONFIG", "SET", "maxmemory-policy", policy)
        self.addCleanup(self.cli, "CONFIG", "SET", "maxmemory", "0")
        self.addCleanup(self.cli, "CONFIG", "SET", "maxmemory-policy", "noeviction")

    def test_a_server_that_may_evict_is_refused_for_locks_only(self):
        url = self.redis.url
        for policy in ("allkeys-lru", "volatile-lru", "allkeys-random"):
            with self.subTest(policy=policy):
                self.config("100mb", policy)
                self.cli("SET", "k", "4102444800")  # a lock someone took before
                r = self.nx("-u", url, "lock", "-n", "k2")
                self.assertOneLineError(r, 78, policy, "noeviction")
                marker = os.path.join(self.tmp, "ran")
                r = self.nx("-u", url, "run-locked", "-n", "k2", "touch", marker)
                self.assertOneLineError(r, 78, policy)
                self.assertFalse(os.path.exists(marker))
                r = self.nx("-u", url, "renew", "k", "4102444800")
                self.assertOneLineError(r, 78, policy)
                # unlock must always be able to free a lock; kv commands still work.
                r = self.nx("-u", url, "unlock", "k", "4102444800")
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.nx("-u", url, "setnx", "kv", "1")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.nx("-u", url, "get", "kv").returncode, 0)
                self.cli("DEL", "kv")

    def test_noeviction_or_no_maxmemory_is_fine(self):
        url = self.redis.url
        for maxmemory, policy in (("100mb", "noeviction"), ("0", "allkeys-lru")):
            with self.subTest(maxmemory=maxmemory, policy=policy):
                self.config(maxmemory, policy)
                got = self.lock_json(url, "fine", "-n")
                r = self.nx("-u", url, "unlock", "fine", got["value"])
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_user_that_may_not_run_info_is_warned_and_goes_on(self):
        self.cli("ACL", "SETUSER", "noinfo", "on", ">noinfo-pw", "~*", "&*", "+@all", "-info")
        self.addCleanup(self.cli, "ACL", "DELUSER", "noinfo")
        url = "redis://noinfo:noinfo-pw@127.0.0.1:%d" % self.redis.port
        r = self.nx("-u", url, "--json", "lock", "-n", "acl")
        self.assertEqual(r.returncode, 0, r.stderr)
        err = r.stderr.decode()
        self.assertIn("INFO refused", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)  # said once
        value = json.loads(r.stdout)["value"]
        r = self.nx("-u", url, "-q", "renew", "acl", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")


class TestSlowTimeReply(RedisSafetyCase):
    def test_a_slow_time_reply_never_takes_over_a_live_lock(self):
        # A holds the lock with a short ttl, renewed: on the server's clock it is
        # never more than about ttl + 1 s from expiry. B's first TIME reaches the
        # server 8 s late; an estimate anchored mid-way ran 4 s ahead and called
        # A's lock expired. B must find it busy, and A's job must run to its end.
        url = self.redis.url
        holder = self.popen("-u", url, "run-locked", "-t", "2", "slow", "sleep", "12",
                            stderr=subprocess.PIPE)
        self.assertTrue(wait_for(lambda: self.cli("EXISTS", "slow") == "1"))
        proxy = DelayedTimeProxy(self.redis.port, 8)
        self.addCleanup(proxy.close)
        r = self.nx("-u", proxy.url, "--io-timeout", "20", "-v", "lock", "-w", "2", "slow",
                    timeout=COMMAND_TIMEOUT + 30)
        self.assertTrue(proxy.delayed, "the proxy never held a TIME reply back")
        self.assertEqual(r.returncode, 75, r.stderr.decode(errors="replace"))
        _, err = holder.communicate(timeout=COMMAND_TIMEOUT + 20)
        self.assertEqual(holder.returncode, 0, err)
