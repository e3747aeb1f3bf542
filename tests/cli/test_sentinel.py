"""redis+sentinel://: commands through a Sentinel, unreachable and unknowing Sentinels, and a failover under run-locked."""
import os
import signal
import sys
import time

from harness import NxlockTestCase, free_port
from sentinel_harness import MASTER_NAME, Deployment, cli, wait_for


class SentinelTestCase(NxlockTestCase):
    """A fresh deployment per test: the tests that fail the master over need one."""
    sentinel_password = None

    def setUp(self):
        super().setUp()
        self.deployment = Deployment(sentinel_password=self.sentinel_password)
        self.addCleanup(self.deployment.stop)
        self.url = self.deployment.url()


class SharedSentinelTestCase(NxlockTestCase):
    """One deployment for the class, for tests that leave it as they found it."""
    sentinel_password = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.deployment = Deployment(sentinel_password=cls.sentinel_password)
        cls.addClassCleanup(cls.deployment.stop)

    def setUp(self):
        super().setUp()
        self.url = self.deployment.url()
        cli(self.deployment.master.port, "FLUSHALL")

    def master_port(self):
        return self.deployment.sentinel.master_port()


class TestThroughSentinel(SharedSentinelTestCase):
    def test_commands_reach_the_master(self):
        r = self.nx("-u", self.url, "setnx", "k", "v1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(cli(self.deployment.master.port, "GET", "k").strip(), "v1")
        r = self.nx("-u", self.url, "get", "k")
        self.assertEqual((r.returncode, r.stdout), (0, b"v1\n"), r.stderr)
        r = self.nx("-u", self.url, "lock", "--ttl", "30", "L")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nx("-u", self.url, "lock", "-n", "--ttl", "30", "L")
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.nx("-u", self.url, "unlock", "--force", "L")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_db_in_the_url_is_selected(self):
        r = self.nx("-u", self.url + "/3", "setnx", "k", "in-three")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(cli(self.deployment.master.port, "-n", "3", "GET", "k").strip(),
                         "in-three")

    def test_the_first_sentinel_down_the_next_one_answers(self):
        dead = free_port()
        url = self.deployment.url(["127.0.0.1:%d" % dead,
                                   "127.0.0.1:%d" % self.deployment.sentinel.port])
        r = self.nx("-u", url, "setnx", "k", "v")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(cli(self.deployment.master.port, "GET", "k").strip(), "v")

    def test_no_sentinel_reachable_names_them(self):
        a, b = free_port(), free_port()
        url = "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/%s" % (a, b, MASTER_NAME)
        r = self.nx("-u", url, "get", "k")
        self.assertOneLineError(r, 69, "no Sentinel reachable", "127.0.0.1:%d" % a,
                                "127.0.0.1:%d" % b)

    def test_unknown_master_name(self):
        url = "redis+sentinel://127.0.0.1:%d/nosuchmaster" % self.deployment.sentinel.port
        r = self.nx("-u", url, "get", "k")
        self.assertOneLineError(r, 69, "no Sentinel knows master 'nosuchmaster'")

    def test_bad_urls_are_64(self):
        for url in ("redis+sentinel://127.0.0.1:26379", "redis+sentinel://127.0.0.1:26379/",
                    "redis+sentinel://127.0.0.1:0/m", "redis+sentinel://a,/m",
                    "redis+sentinel://h/m/x"):
            r = self.nx("-u", url, "get", "k")
            self.assertOneLineError(r, 64, url)


class TestSentinelPassword(SharedSentinelTestCase):
    sentinel_password = "sentinel-secret"

    def test_password_from_file_and_env(self):
        path = os.path.join(self.tmp, "sentinel-password")
        with open(path, "w") as f:
            f.write(self.sentinel_password + "\n")
        r = self.nx("-u", self.url, "--sentinel-password-file", path, "setnx", "k", "v")
        self.assertEqual(r.returncode, 0, r.stderr)
        env = dict(self.env, NXLOCK_SENTINEL_PASSWORD=self.sentinel_password)
        r = self.nx("-u", self.url, "get", "k", env=env)
        self.assertEqual((r.returncode, r.stdout), (0, b"v\n"), r.stderr)

    def test_no_password_is_refused_and_not_printed(self):
        r = self.nx("-u", self.url, "get", "k")
        self.assertOneLineError(r, 77, "Sentinel")
        env = dict(self.env, NXLOCK_SENTINEL_PASSWORD="wrong-one")
        r = self.nx("-u", self.url, "get", "k", env=env)
        self.assertOneLineError(r, 77)
        self.assertNotIn(b"wrong-one", r.stderr)


class TestRole(SentinelTestCase):
    def test_a_replica_named_as_master_is_refused_by_role(self):
        # A Sentinel that points at a replica (as one that has not seen a
        # failover yet would): ROLE on the answer says "slave", never written to.
        self.deployment.sentinel.cli("SENTINEL", "REMOVE", MASTER_NAME)
        self.deployment.sentinel.cli("SENTINEL", "MONITOR", MASTER_NAME, "127.0.0.1",
                                     str(self.deployment.replica.port), "1")
        r = self.nx("-u", self.url, "--timeout", "1", "setnx", "k", "v")
        self.assertOneLineError(r, 69, "master '%s' at 127.0.0.1:%d" % (
            MASTER_NAME, self.deployment.replica.port), "slave")


def failover_round(test, extra_args=()):
    """SIGKILLs the master while run-locked holds a lock for a 9 s job.

    Returns (seconds from the kill until a renewal landed on the new master,
    how many times a second taker got the lock while the first held it).
    """
    d = test.deployment
    old_port = d.master.port
    with open(os.path.join(test.tmp, "job.err"), "wb") as err:
        job = test.popen("-u", test.url, *extra_args, "run-locked", "--ttl", "8", "job",
                         "sleep", "9", stderr=err)
    try:
        wait_for(lambda: cli(old_port, "EXISTS", "job").strip() == "1", 10, "the lock")
        # The replica must have the lock before the master dies (with --replicas
        # 1 nxlock itself waits for that).
        wait_for(lambda: cli(d.replica.port, "EXISTS", "job").strip() == "1", 10,
                 "the replica to have the lock")
        time.sleep(0.5)
        killed_at = time.monotonic()
        d.master.process.send_signal(signal.SIGKILL)
        d.master.process.wait()
        wait_for(lambda: d.sentinel.master_port() == d.replica.port, 30, "the failover")
        failover_done = time.monotonic() - killed_at
        first = cli(d.replica.port, "GET", "job").strip()
        # Follow: a renewal rewrites the lock's value on the new master.
        wait_for(lambda: cli(d.replica.port, "GET", "job").strip() not in ("", first), 15,
                 "a renewal on the new master")
        followed = time.monotonic() - killed_at
        doubles = 0
        taker = test.nx("-u", test.url, *extra_args, "lock", "-n", "--ttl", "30", "job")
        if taker.returncode == 0:
            doubles += 1
        test.assertEqual(taker.returncode, 75, taker.stderr)
        job.wait(timeout=30)
        with open(os.path.join(test.tmp, "job.err"), "rb") as f:
            err = f.read()
        test.assertEqual(job.returncode, 0, err)
        # Released on the new master at the end.
        test.assertEqual(cli(d.replica.port, "EXISTS", "job").strip(), "0")
        sys.stderr.write("\n[failover] sentinel switched after %.2fs, run-locked renewed on the "
                         "new master %.2fs after the kill\n" % (failover_done, followed))
        return followed, doubles
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


class TestFailover(SentinelTestCase):
    def test_run_locked_follows_a_failover(self):
        failover_round(self)
