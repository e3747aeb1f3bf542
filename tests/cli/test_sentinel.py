"""redis+sentinel://: commands through a Sentinel, unreachable and unknowing Sentinels, and a failover under run-locked."""
import os
import re
import signal
import time

from harness import NxlockTestCase, free_port
from sentinel_harness import MASTER_NAME, Deployment, cli, failover_round, read_text, wait_for


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
        r = self.nx("-u", self.url, "--io-timeout", "1", "setnx", "k", "v")
        self.assertOneLineError(r, 69, "master '%s' at 127.0.0.1:%d" % (
            MASTER_NAME, self.deployment.replica.port), "slave")


class TestFailover(SentinelTestCase):
    def test_run_locked_follows_a_failover(self):
        _, doubles = failover_round(self)
        self.assertEqual(doubles, 0)


class TestReplicas(SharedSentinelTestCase):
    def test_confirmed_by_the_replica(self):
        r = self.nx("-u", self.url, "--replicas", "1", "lock", "-n", "--ttl", "30", "L")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        # WAIT answered: the replica has it already, no waiting needed here.
        self.assertEqual(cli(self.deployment.replica.port, "GET", "L").strip(), value)
        r = self.nx("-u", self.url, "--replicas", "1", "run-locked", "-n", "R", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_more_replicas_than_there_are_is_69_and_nothing_left(self):
        r = self.nx("-u", self.url, "--replicas", "2", "--io-timeout", "0.5", "lock", "-n", "L")
        self.assertOneLineError(r, 69, "1 of 2 replicas", "undone")
        self.assertEqual(cli(self.deployment.master.port, "EXISTS", "L").strip(), "0")

    def test_a_stopped_replica_means_no_lock(self):
        replica = self.deployment.replica.process
        replica.send_signal(signal.SIGSTOP)
        try:
            r = self.nx("-u", self.url, "--replicas", "1", "--io-timeout", "0.5", "lock", "-n",
                        "--ttl", "30", "L")
            self.assertOneLineError(r, 69, "0 of 1 replicas", "undone")
            self.assertEqual(r.stdout, b"")
            self.assertEqual(cli(self.deployment.master.port, "EXISTS", "L").strip(), "0")
            marker = os.path.join(self.tmp, "ran")
            r = self.nx("-u", self.url, "--replicas", "1", "--io-timeout", "0.5", "run-locked",
                        "-n", "R", "touch", marker)
            self.assertOneLineError(r, 69, "0 of 1 replicas")
            self.assertFalse(os.path.exists(marker))
            self.assertEqual(cli(self.deployment.master.port, "EXISTS", "R").strip(), "0")
        finally:
            replica.send_signal(signal.SIGCONT)
        r = self.nx("-u", self.url, "status", "L")
        self.assertEqual(r.returncode, 1, r.stderr)  # free

    def test_a_renewal_not_confirmed_is_retried(self):
        # The replica stops for 1.5 s while run-locked (ttl 3: renewals every
        # second or so) runs a 4 s job: renewals fail, are retried, and succeed
        # once it is back, before the lock could expire.
        replica = self.deployment.replica.process
        # In step with the master first (still in its first sync, or stopped by an
        # earlier test): the acquisition itself must be confirmed within --io-timeout.
        # A write, so that WAIT counts a replica that has it, not merely one connected.
        master_port = self.deployment.master.port

        def in_step():
            if not cli(master_port, "INCR", "in-step-probe"):
                return False
            if cli(master_port, "WAIT", "1", "200").strip() != "1":
                return False
            # And acknowledged up to the master's offset, as ROLE reports it:
            # a replica still finishing its first sync answered WAIT once and
            # then left the acquisition's WAIT unanswered.
            role = cli(master_port, "ROLE").split()
            return len(role) >= 5 and role[1] == role[4]

        wait_for(in_step, 20, "the replica in step")
        cli(master_port, "DEL", "in-step-probe")
        job_err = os.path.join(self.tmp, "job.err")
        with open(job_err, "wb") as err:
            job = self.popen("-u", self.url, "--replicas", "1", "--io-timeout", "0.5", "-v",
                             "run-locked", "--ttl", "3", "R", "sleep", "4", stderr=err)
        try:
            # Acquired and confirmed (the trace's SETNX line comes after WAIT): the
            # replica must not stop while it still has the acquisition to confirm.
            wait_for(lambda: re.search(r"SETNX R \d+ → 1", read_text(job_err)), 10, "the lock")
            replica.send_signal(signal.SIGSTOP)
            time.sleep(1.5)  # the fault lasts 1.5 s
        finally:
            replica.send_signal(signal.SIGCONT)
        job.wait(timeout=30)
        err = read_text(job_err)
        self.assertEqual(job.returncode, 0, err)
        self.assertIn("renewal failed, retrying", err)
        self.assertIn("replicas confirmed", err)


class TestFailoverWithReplicas(SentinelTestCase):
    """Two replicas: after the failover one is left to confirm the renewals."""
    rounds = 3

    def setUp(self):
        NxlockTestCase.setUp(self)

    def test_failover_rounds_have_no_double_holder(self):
        total = 0
        for _ in range(self.rounds):
            self.deployment = Deployment(replicas=2)
            try:
                self.url = self.deployment.url()
                _, doubles = failover_round(self, ["--replicas", "1"])
                total += doubles
            finally:
                self.deployment.stop()
        self.assertEqual(total, 0)
