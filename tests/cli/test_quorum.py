"""Quorum mode: one lock over three independent redis-servers (-u URL -u URL -u URL)."""
import json
import os
import signal
import subprocess
import threading
import time
import unittest

from harness import BIN, NxlockTestCase, RedisServer, alive, dying_with_parent, read, wait_for


class Quorum(NxlockTestCase):
    def setUp(self):
        super().setUp()
        # Fresh servers for every test: several tests kill or stop some of them.
        self.servers = []
        for _ in range(3):
            server = RedisServer()
            self.addCleanup(server.stop)
            self.addCleanup(self.resume, server)  # runs before stop: a stopped server must go on
            self.servers.append(server)

    def resume(self, server):
        if server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGCONT)

    def urls(self, servers=None):
        args = []
        for server in servers or self.servers:
            args += ["-u", server.url]
        return args

    def q(self, *args, **kwargs):
        return self.nx(*self.urls(), *args, **kwargs)

    def values(self, key):
        """The key's value on each server (None where absent or down)."""
        found = []
        for server in self.servers:
            if server.process.poll() is not None:
                found.append(None)
                continue
            out = server.cli("GET", key).strip()
            found.append(out.decode() if out else None)
        return found

    def lock(self, key, *args):
        r = self.q("lock", *args, key)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().strip()

    def test_the_lock_is_held_on_all_three_with_one_value(self):
        value = self.lock("job", "-t", "60")
        self.assertEqual(self.values("job"), [value] * 3)
        # The holder's details beside it, on every server (written before `lock` exits).
        for server in self.servers:
            holder = json.loads(server.cli("GET", "{job}:holder:job"))
            self.assertEqual(holder["value"], value)
        # The key/value commands read one server: each of them has it.
        for server in self.servers:
            r = self.nx("-u", server.url, "get", "job")
            self.assertEqual(r.stdout.decode().strip(), value)

    def test_one_server_down_still_locks_and_others_get_75(self):
        self.servers[2].stop()
        value = self.lock("job", "-t", "60")
        self.assertEqual(self.values("job"), [value, value, None])
        r = self.q("lock", "-n", "job")
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.q("run-locked", "-n", "job", "true")
        self.assertEqual(r.returncode, 75, r.stderr)

    def test_a_majority_held_by_another_client_cannot_be_taken(self):
        live = str(int(time.time()) + 60)
        self.servers[0].cli("SET", "job", live)
        self.servers[1].cli("SET", "job", live)
        r = self.q("lock", "-n", "job")
        self.assertEqual(r.returncode, 75, r.stderr)
        # The third server, where we did take it, was undone.
        self.assertEqual(self.values("job"), [live, live, None])
        r = self.q("lock", "-w", "0.5", "job")
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertEqual(self.values("job"), [live, live, None])

    def test_a_minority_held_by_another_client_does_not_block(self):
        live = str(int(time.time()) + 60)
        self.servers[0].cli("SET", "job", live)
        value = self.lock("job", "-n")
        self.assertEqual(self.values("job"), [live, value, value])
        r = self.q("status", "--json", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(r.stdout)
        self.assertEqual(status["value"], value)
        self.assertEqual([s["holds"] for s in status["servers"]], [False, True, True])
        self.assertEqual([s["state"] for s in status["servers"]], ["held", "held", "held"])

    def test_what_is_not_a_lock_on_a_minority_does_not_hide_the_majoritys_holder(self):
        value = self.lock("job", "-t", "60")
        token = json.loads(self.q("status", "--json", "job").stdout)["fence"]
        self.servers[0].cli("SET", "job", "junk-value")
        r = self.q("status", "--json", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(r.stdout)
        self.assertEqual((status["state"], status["value"]), ("held", value))
        self.assertEqual(status["fence"], token)
        self.assertEqual([s["state"] for s in status["servers"]], ["foreign", "held", "held"])
        self.assertIn("not a lock timestamp", status["servers"][0]["error"])
        # Where no majority holds one value, what is not a lock is the answer: 65.
        self.servers[1].cli("DEL", "job")
        r = self.q("status", "job")
        self.assertEqual(r.returncode, 65, r.stderr)
        self.assertIn(b"junk-value", r.stderr)

    def test_status_shows_the_holders_token_whatever_the_counters_say(self):
        value = self.lock("job", "-t", "60")
        token = json.loads(self.q("status", "--json", "job").stdout)["fence"]
        # Counters apart, as a server that took the lock after the majority did
        # leaves them, or another client's takes on a server where it was lost.
        for server, counter in zip(self.servers, (token + 100, token + 50, token - 10)):
            server.cli("SET", "{job}:fence:job", str(counter))
        r = self.q("status", "--json", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(r.stdout)
        self.assertEqual((status["value"], status["fence"]), (value, token))
        rows = json.loads(self.q("list", "--json").stdout)["locks"]
        self.assertEqual([(row["key"], row["fence"]) for row in rows], [("job", token)])

    def test_a_page_clients_lock_on_a_majority_moves_no_token_back(self):
        page = str(int(time.time()) + 600)
        self.servers[0].cli("SET", "job", page)
        self.servers[0].cli("SET", "{job}:fence:job", "1000")  # an old take there
        self.lock("job", "-t", "60")
        token = json.loads(self.q("status", "--json", "job").stdout)["fence"]
        # A page client takes over on a second server: its lock, with no token.
        self.servers[2].cli("SET", "job", page)
        r = self.q("status", "--json", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(r.stdout)
        self.assertEqual((status["value"], status["fence"]), (page, token))

    def test_what_is_not_a_lock_on_a_minority_does_not_stop_a_take(self):
        self.servers[0].cli("SET", "job", "junk-value")
        # The third server answers last, after the one holding what is not a lock.
        os.kill(self.servers[2].process.pid, signal.SIGSTOP)
        resume = threading.Timer(0.5, self.resume, (self.servers[2],))
        resume.start()
        self.addCleanup(resume.cancel)
        r = self.q("lock", "-n", "-t", "60", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        self.assertEqual(self.values("job"), ["junk-value", value, value])
        # Where no majority can be taken, what is not a lock is the answer: 65.
        self.servers[1].cli("SET", "other", "junk-value")
        self.servers[2].cli("SET", "other", str(int(time.time()) + 60))
        r = self.q("lock", "-n", "other")
        self.assertEqual(r.returncode, 65, r.stderr)

    def test_what_is_not_a_lock_on_a_minority_does_not_stop_an_unlock(self):
        value = self.lock("job", "-t", "60")
        self.servers[0].cli("SET", "job", "junk-value")
        # The third server answers last, after the one holding what is not a lock.
        os.kill(self.servers[2].process.pid, signal.SIGSTOP)
        resume = threading.Timer(0.5, self.resume, (self.servers[2],))
        resume.start()
        self.addCleanup(resume.cancel)
        r = self.q("unlock", "job", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.values("job"), ["junk-value", None, None])

    def test_two_servers_down_is_69(self):
        self.servers[1].stop()
        self.servers[2].stop()
        r = self.q("lock", "-n", "job")
        self.assertOneLineError(r, 69, "only 1 of 3 servers answered", "majority is 2")
        self.assertEqual(self.values("job"), [None, None, None], "nothing left behind")
        r = self.q("status", "job")
        self.assertOneLineError(r, 69, "only 1 of 3")
        r = self.q("run-locked", "-n", "job", "touch", os.path.join(self.tmp, "ran"))
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "ran")))

    def test_unlock_force_deletes_everywhere(self):
        self.lock("job")
        self.servers[2].cli("DEL", "job")
        r = self.q("unlock", "--force", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.values("job"), [None, None, None])
        r = self.q("unlock", "--force", "job")
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_unlock_with_one_server_down_is_released_on_the_majority(self):
        value = self.lock("job")
        self.servers[0].stop()
        r = self.q("unlock", "job", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.values("job"), [None, None, None])

    def test_unlock_of_a_value_taken_over_on_a_majority_is_1(self):
        value = self.lock("job")
        other = str(int(value) + 5)
        self.servers[0].cli("SET", "job", other)
        self.servers[1].cli("SET", "job", other)
        r = self.q("unlock", "job", value)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"taken over", r.stderr)
        # Released where it was still ours; the other's stays.
        self.assertEqual(self.values("job"), [other, other, None])

    def test_renew_needs_a_majority(self):
        value = self.lock("job", "-t", "30")
        r = self.q("renew", "-t", "90", "job", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        renewed = r.stdout.decode().strip()
        self.assertEqual(self.values("job"), [renewed] * 3)
        other = str(int(renewed) + 5)
        self.servers[1].cli("SET", "job", other)
        self.servers[2].cli("SET", "job", other)
        r = self.q("renew", "job", renewed)
        self.assertEqual(r.returncode, 1, r.stderr)
        # The minority that did renew let go again.
        self.assertEqual(self.values("job"), [None, other, other])

    def test_key_value_commands_refuse_several_urls(self):
        for args in (["get", "k"], ["setnx", "k", "v"], ["getset", "k", "v"], ["del", "k"]):
            r = self.q(*args)
            self.assertOneLineError(r, 64, "work on one server")

    def test_the_same_server_twice_is_refused(self):
        r = self.nx("-u", self.servers[0].url, "-u", self.servers[0].url, "lock", "-n", "job")
        self.assertOneLineError(r, 64, "given twice")

    def test_urls_from_the_environment(self):
        env = dict(self.env)
        env["NXLOCK_URL"] = " ".join(s.url for s in self.servers)
        r = self.nx("lock", "-n", "job", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.values("job"), [r.stdout.decode().strip()] * 3)

    def test_urls_after_the_command_name(self):
        r = self.nx("lock", "-n", *self.urls(), "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.values("job"), [r.stdout.decode().strip()] * 3)

    def test_a_waiter_wakes_on_the_release(self):
        value = self.lock("job", "-t", "60")
        waiter = self.popen(*self.urls(), "lock", "-w", "30", "job", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        time.sleep(0.5)  # a bound: a waiter that did not wait would have exited by then
        self.assertIsNone(waiter.poll(), "waits while held")
        released = time.monotonic()
        r = self.q("unlock", "job", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        out, err = waiter.communicate(timeout=30)
        self.assertEqual(waiter.returncode, 0, err)
        self.assertLess(time.monotonic() - released, 10)
        # Held by a majority with its value. The waiter may have woken on the first
        # servers' releases, before the last one's: then that server is left free.
        values = self.values("job")
        self.assertGreaterEqual(values.count(out.decode().strip()), 2, values)
        self.assertEqual(values.count(out.decode().strip()) + values.count(None), 3, values)

    def test_workers_with_one_server_down_never_overlap(self):
        self.servers[1].stop()
        log = os.path.join(self.tmp, "log")
        section = 'echo "in $$" >> "%s"; sleep 0.05; echo "out $$" >> "%s"' % (log, log)
        urls = " ".join("-u " + s.url for s in self.servers)
        workers = []
        for _ in range(6):
            loop = ("for j in 1 2 3 4 5; do %s %s run-locked -w 120 job sh -c '%s' || exit 9; "
                    "done" % (os.path.abspath(BIN), urls, section))
            workers.append(subprocess.Popen(dying_with_parent(["sh", "-c", loop]), env=self.env,
                                            stderr=subprocess.PIPE))
        for worker in workers:
            _, err = worker.communicate(timeout=300)
            self.assertEqual(worker.returncode, 0, err)
        events = read(log).split()[0::2]
        self.assertEqual(len(events), 6 * 5 * 2)
        depth = 0
        for event in events:
            depth += 1 if event == "in" else -1
            self.assertIn(depth, (0, 1), "overlapping critical sections")

    def run_until_majority_lost(self, lose):
        """Starts run-locked -t 3 on a long job, takes the majority away with `lose`,
        and returns the result, the job's pid and how long the loss took to act on."""
        pid_file = os.path.join(self.tmp, "child.pid")
        job = self.popen(*self.urls(), "run-locked", "-t", "3", "--kill-after", "1", "job",
                         "sh", "-c", 'echo $$ > "%s"; exec sleep 60' % pid_file,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertTrue(wait_for(lambda: read(pid_file).strip() != "", timeout=20))
        child = int(read(pid_file))
        lose()
        lost_at = time.monotonic()
        _, err = job.communicate(timeout=60)
        return job.returncode, err, child, time.monotonic() - lost_at

    def test_run_locked_stops_the_job_when_the_majority_is_killed(self):
        def kill_two():
            self.servers[0].stop()
            self.servers[1].stop()
        status, err, child, took = self.run_until_majority_lost(kill_two)
        self.assertEqual(status, 79, err)
        self.assertIn(b"lost", err)
        self.assertFalse(alive(child), "the job was stopped")
        self.assertLess(took, 30)

    def test_run_locked_stops_the_job_when_the_majority_is_stopped(self):
        def stop_two():
            os.kill(self.servers[1].process.pid, signal.SIGSTOP)
            os.kill(self.servers[2].process.pid, signal.SIGSTOP)
        status, err, child, took = self.run_until_majority_lost(stop_two)
        self.assertEqual(status, 79, err)
        self.assertFalse(alive(child), "the job was stopped")
        self.assertLess(took, 30)

    def test_run_locked_keeps_renewing_with_one_server_down(self):
        self.servers[0].stop()
        r = self.q("-v", "run-locked", "-t", "1", "job", "sleep", "2.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"lost", r.stderr)
        self.assertIn(b"SET-IF-EQUAL", r.stderr, "renewed while the job ran")
        self.assertEqual(self.values("job"), [None, None, None], "released at the end")


    def test_a_stopped_server_costs_no_step_its_timeout(self):
        """One of three SIGSTOPped: every step is decided by the other two, so
        none waits out --io-timeout 10 (a generous bound: well under it)."""
        os.kill(self.servers[1].process.pid, signal.SIGSTOP)  # resumed by the cleanup
        urls = self.urls()

        def timed(*args):
            started = time.monotonic()
            r = self.nx("--io-timeout", "10", *urls, *args, timeout=60)
            return r, time.monotonic() - started

        r, took = timed("lock", "--json", "-n", "-t", "60", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(took, 5)
        got = json.loads(r.stdout)
        self.assertGreater(got["fence"], 0)
        r, took = timed("unlock", "job", got["value"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(took, 5)
        # -t 1: renewed every few hundred ms while the job runs 2 s.
        r, took = timed("-v", "run-locked", "-t", "1", "job", "sleep", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"lost", r.stderr)
        self.assertGreaterEqual(r.stderr.count(b"SET-IF-EQUAL"), 4, "renewed several times")
        self.assertLess(took, 2 + 5)
        for server in (self.servers[0], self.servers[2]):
            self.assertEqual(server.cli("GET", "job").strip(), b"", "released")

    # ---- fencing tokens ----

    def counter(self, server, key):
        out = server.cli("GET", "{%s}:fence:%s" % (key, key)).strip()
        return int(out) if out else None

    def test_tokens_strictly_increase_over_quorum_runs_with_servers_down(self):
        """Each phase has a different server down (its data kept: its URL is
        replaced by a socket nobody listens on), so two phases' majorities share one
        server only. Without the raise, the last phase's max would not pass the
        one before (B=4 and C=2 after A,B x3 then A,C x1)."""
        tokens = []
        dead = "unix://" + os.path.join(self.tmp, "nobody.sock")  # refused, and never taken

        def run(times, down=None):
            urls = []
            for server in self.servers:
                urls += ["-u", dead if server is down else server.url]
            for _ in range(times):
                r = self.nx(*urls, "lock", "--json", "-n", "-t", "60", "job")
                self.assertEqual(r.returncode, 0, r.stderr)
                got = json.loads(r.stdout)
                tokens.append(got["fence"])
                # A majority's counters hold the token. A server that took the lock
                # after the majority had it (its reply came late) keeps a token of
                # its own, from its clock, which may be above it.
                counters = [self.counter(s, "job") for s in self.servers if s is not down]
                self.assertGreaterEqual(counters.count(got["fence"]), 2, counters)
                self.assertLessEqual(sorted(counters, reverse=True)[1], got["fence"], counters)
                status = json.loads(self.nx(*urls, "status", "--json", "job").stdout)
                self.assertEqual(status["fence"], got["fence"])
                r = self.nx(*urls, "unlock", "job", got["value"])
                self.assertEqual(r.returncode, 0, r.stderr)

        a, b, c = self.servers
        run(2)
        for down, times in ((c, 3), (b, 1), (a, 2)):
            run(times, down)
        run(1)
        # run-locked gives the child the token.
        r = self.q("run-locked", "-n", "job", "sh", "-c", 'echo "$NXLOCK_FENCE"')
        self.assertEqual(r.returncode, 0, r.stderr)
        tokens.append(int(r.stdout))
        # A takeover of an expired lock (never released) gets a higher one too.
        r = self.q("lock", "--json", "-n", "-t", "1", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        tokens.append(json.loads(r.stdout)["fence"])
        self.assertTrue(wait_for(lambda: self.q("status", "job").returncode == 1, timeout=20))
        r = self.q("lock", "--json", "-n", "-t", "60", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        tokens.append(json.loads(r.stdout)["fence"])
        self.assertTrue(all(isinstance(t, int) and t > 0 for t in tokens), tokens)
        self.assertEqual(tokens, sorted(set(tokens)), "strictly increasing")


class QuorumOfFileStores(NxlockTestCase):
    """The embedded store is a URL like any other: a quorum of three works too."""

    def test_three_embedded_stores(self):
        urls = []
        for i in range(3):
            urls += ["-u", "file://" + os.path.join(self.tmp, "store%d" % i)]
        r = self.nx(*urls, "lock", "-n", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        value = r.stdout.decode().strip()
        for i in range(3):
            got = self.nx("-u", "file://" + os.path.join(self.tmp, "store%d" % i), "get", "job")
            self.assertEqual(got.stdout.decode().strip(), value)
        r = self.nx(*urls, "lock", "-n", "job")
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.nx(*urls, "unlock", "job", value)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Fencing tokens over the embedded stores too: strictly increasing.
        tokens = []
        for _ in range(4):
            r = self.nx(*urls, "lock", "--json", "-n", "job")
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout)
            tokens.append(got["fence"])
            r = self.nx(*urls, "unlock", "job", got["value"])
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(tokens[0], 0)
        self.assertEqual(tokens, sorted(set(tokens)), "strictly increasing")



class QuorumOfUrlKinds(NxlockTestCase):
    """A quorum's servers may be any URL kind: one over TLS, one a Sentinel-guarded
    master, one plain. Cheap: one lock/unlock round."""

    @classmethod
    def setUpClass(cls):
        from sentinel_harness import Deployment
        from deployments import Certificates, TlsRedisServer
        cls.certs = Certificates()
        cls.addClassCleanup(subprocess.run, ["rm", "-rf", cls.certs.dir])
        cls.tls = TlsRedisServer(cls.certs)
        cls.addClassCleanup(cls.tls.stop)
        cls.deployment = Deployment(replicas=0)
        cls.addClassCleanup(cls.deployment.stop)
        cls.plain = RedisServer()
        cls.addClassCleanup(cls.plain.stop)

    def test_tls_sentinel_and_plain_servers_in_one_quorum(self):
        master = self.deployment.master
        urls = ["-u", self.tls.url_for(), "-u", self.deployment.url(), "-u", self.plain.url,
                "--cacert", self.certs.path("ca.crt")]
        r = self.nx(*urls, "lock", "--json", "-n", "-t", "60", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertGreater(got["fence"], 0)
        held = [server.cli("GET", "job").strip().decode() for server in (self.tls, master,
                                                                           self.plain)]
        self.assertEqual(held, [got["value"]] * 3)
        r = self.nx(*urls, "status", "--json", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([s["state"] for s in json.loads(r.stdout)["servers"]], ["held"] * 3)
        r = self.nx(*urls, "unlock", "job", got["value"])
        self.assertEqual(r.returncode, 0, r.stderr)
        for server in (self.tls, master, self.plain):
            self.assertEqual(server.cli("GET", "job").strip(), b"")

if __name__ == "__main__":
    unittest.main()
