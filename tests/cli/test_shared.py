"""--shared on lock and run-locked, as flock -s: any number of shared holders or one
exclusive holder, an exclusive waiter not starved by later shared ones, tokens from
one counter, a dead shared holder's lease lapsing; on every backend that takes
--shared (harness.backends), and keys on every node of a Redis Cluster.

Every ordering the tests rely on is made by the test (a holder confirmed holding,
a waiter confirmed queued) before the next step; timing appears only as generous
upper bounds."""
import json
import os
import signal
import subprocess
import threading
import time
import unittest

from harness import NxlockTestCase, side_key, smoke, wait_for
from deployments import WithCluster

KEY = "backup"


class SharedCase(NxlockTestCase):
    def lock(self, url, *options, key=KEY):
        return self.nx("-u", url, "--json", "lock", *options, key)

    def hold(self, url, *options, key=KEY):
        r = self.lock(url, "-n", *options, key=key)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.addCleanup(self.nx, "-u", url, "unlock", key, got["value"])
        return got

    def shared_backends(self, *also):
        """The backends that take --shared (harness.backends), and `also` what else
        the test needs of them."""
        return self.backends(offering=("shared", *also))


class TestShared(SharedCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    @smoke
    def test_shared_holders_together_exclusive_apart(self):
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                a = self.hold(url, "--shared", "-t", "60")
                b = self.hold(url, "--shared", "-t", "60")
                self.assertGreater(b["fence"], a["fence"])
                # An exclusive taker is refused while shared ones hold.
                r = self.lock(url, "-n", "-t", "60")
                self.assertEqual(r.returncode, 75, r.stderr)
                r = self.nx("-u", url, "status", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(b"shared by 2 holders", r.stdout)
                r = self.nx("-u", url, "renew", "-t", "120", KEY, a["value"])
                self.assertEqual(r.returncode, 0, r.stderr)
                renewed = r.stdout.decode().strip()
                for value in (renewed, b["value"]):
                    r = self.nx("-u", url, "unlock", KEY, value)
                    self.assertEqual(r.returncode, 0, r.stderr)
                # The last one freed the key: the exclusive one comes, above both tokens.
                c = self.hold(url, "-t", "60")
                self.assertGreater(c["fence"], b["fence"])
                r = self.lock(url, "-n", "--shared", "-t", "60")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"held until", r.stderr)
                r = self.nx("-u", url, "unlock", KEY, c["value"])
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_exclusive_waiter_not_starved_by_later_shared(self):
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                a = self.hold(url, "--shared", "-t", "60")
                order = os.path.join(self.tmp, "order-" + backend.name)
                writer = self.popen("-u", url, "run-locked", "-w", "60", "-t", "60", KEY,
                                    "sh", "-c", 'echo writer >> "$0"', order,
                                    stderr=subprocess.PIPE)
                self.addCleanup(writer.kill)
                # The writer is queued (its step refused, it waits) before the next reader.
                def writer_waits():
                    r = self.lock(url, "-n", "--shared", "-t", "60")
                    if r.returncode == 0:
                        self.nx("-u", url, "unlock", KEY, json.loads(r.stdout)["value"])
                        return False
                    return r.returncode == 75
                self.assertTrue(wait_for(writer_waits, timeout=20))
                reader = self.popen("-u", url, "run-locked", "--shared", "-w", "60", "-t", "60",
                                    KEY, "sh", "-c", 'echo reader >> "$0"', order,
                                    stderr=subprocess.PIPE)
                self.addCleanup(reader.kill)
                time.sleep(0.5)  # a bound: a waiter that went while `a` holds would have by then
                self.assertFalse(os.path.exists(order))  # neither goes while `a` holds
                r = self.nx("-u", url, "unlock", KEY, a["value"])
                self.assertEqual(r.returncode, 0, r.stderr)
                for p in (writer, reader):
                    _, err = p.communicate(timeout=30)
                    self.assertEqual(p.returncode, 0, err)
                with open(order) as f:
                    self.assertEqual(f.read().split(), ["writer", "reader"])

    def test_shared_sections_overlap(self):
        """Each of two shared jobs waits, inside its section, for the other's to start:
        both finish only if they hold the lock at the same time."""
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                mine = os.path.join(self.tmp, backend.name + "-a")
                theirs = os.path.join(self.tmp, backend.name + "-b")
                script = ('touch "$0"; i=0; while [ ! -e "$1" ] && [ $i -lt 300 ]; do '
                          'sleep 0.1; i=$((i+1)); done; [ -e "$1" ]')
                jobs = [self.popen("-u", backend.url, "run-locked", "--shared", "-w", "60", KEY,
                                   "sh", "-c", script, a, b, stderr=subprocess.PIPE)
                        for a, b in ((mine, theirs), (theirs, mine))]
                for job in jobs:
                    _, err = job.communicate(timeout=60)
                    self.assertEqual(job.returncode, 0, err)

    def test_sigkilled_shared_holder_lapses(self):
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                started = os.path.join(self.tmp, "started-" + backend.name)
                holder = self.popen("-u", url, "run-locked", "--shared", "-t", "2", KEY,
                                    "sh", "-c", 'touch "$0"; sleep 60', started)
                self.addCleanup(holder.kill)
                self.assertTrue(wait_for(lambda: os.path.exists(started), timeout=20))
                holder.send_signal(signal.SIGKILL)
                holder.wait(10)
                # Its lease is no longer renewed: within ttl + a little, an exclusive gets it.
                r = self.nx("-u", url, "run-locked", "-w", "30", "-t", "10", KEY, "true",
                            timeout=40)
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_shared_holder_that_loses_its_lease_stops_its_job(self):
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                started = os.path.join(self.tmp, "lost-" + backend.name)
                holder = self.popen("-u", url, "run-locked", "--shared", "-t", "3", KEY,
                                    "sh", "-c", 'touch "$0"; sleep 60', started,
                                    stderr=subprocess.PIPE)
                self.addCleanup(holder.kill)
                self.assertTrue(wait_for(lambda: os.path.exists(started), timeout=20))
                # Its lease is taken away (unlock --force drops the leases too): the
                # next renewal finds it gone, and the job is stopped as for any lost lock.
                r = self.nx("-u", url, "unlock", "--force", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                _, err = holder.communicate(timeout=30)
                self.assertEqual(holder.returncode, 79, err)
                self.assertIn(b"lost", err)

    def test_a_bare_value_never_releases_shared_holders(self):
        # The sequence a user met: the key's bare timestamp, as `status` shows it,
        # given to unlock while a shared job runs, then an exclusive taker.
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                a = self.hold(url, "--shared", "-t", "60")
                r = self.nx("-u", url, "--json", "status", KEY)
                bare = json.loads(r.stdout)["value"]
                self.assertEqual(json.loads(r.stdout)["kind"], "shared")
                for command in (("unlock",), ("renew", "-t", "60")):
                    r = self.nx("-u", url, *command, KEY, bare)
                    self.assertOneLineError(r, 64, "shared holder", a["value"], "EXPIRY:ID")
                r = self.lock(url, "-n", "-t", "30")
                self.assertEqual(r.returncode, 75, r.stderr)

    def test_a_page_client_taking_the_key_stops_the_shared_job(self):
        for backend in self.shared_backends("kv"):
            for page_step in (("del", KEY), ("getset", KEY, "9999999999")):
                with self.subTest(backend=backend.name, step=page_step[0]):
                    url = backend.url
                    started = os.path.join(self.tmp, "page-%s-%s" % (backend.name, page_step[0]))
                    holder = self.popen("-u", url, "run-locked", "--shared", "-t", "3", KEY,
                                        "sh", "-c", 'touch "$0"; sleep 60', started,
                                        stderr=subprocess.PIPE)
                    self.addCleanup(holder.kill)
                    self.assertTrue(wait_for(lambda: os.path.exists(started), timeout=20))
                    r = self.nx("-u", url, *page_step)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    value_after = self.nx("-u", url, "get", KEY).stdout
                    _, err = holder.communicate(timeout=30)
                    self.assertEqual(holder.returncode, 79, err)
                    # Its renewal never wrote over what the page client left.
                    self.assertEqual(self.nx("-u", url, "get", KEY).stdout, value_after)
                    self.nx("-u", url, "del", KEY)

    def test_a_set_that_lost_its_key_never_holds_a_later_holders(self):
        # A page client deletes the key under live leases; an exclusive holder then
        # writes the same timestamp (same second of expiry). The key is the exclusive
        # holder's: the old leases are no holders, and cannot renew or release it.
        for backend in self.shared_backends("slots", "kv"):
            for kind in (("--shared",), ("--slots", "2")):
                with self.subTest(backend=backend.name, kind=kind[0]):
                    url = backend.url
                    key = "orphan" + kind[0]
                    orphan = self.lock(url, "-n", *kind, "-t", "40", key=key)
                    self.assertEqual(orphan.returncode, 0, orphan.stderr)
                    old = json.loads(orphan.stdout)
                    expiry = old["expires_at"]
                    self.assertEqual(self.nx("-u", url, "del", key).returncode, 0)
                    value = None
                    for _ in range(5):  # a second may turn between reading the clock and the take
                        r = self.lock(url, "-n", "-t", str(expiry - int(time.time()) - 1), key=key)
                        self.assertEqual(r.returncode, 0, r.stderr)
                        value = json.loads(r.stdout)["value"]
                        if value == str(expiry):
                            break
                        self.nx("-u", url, "unlock", key, value)
                    self.assertEqual(value, str(expiry))
                    self.addCleanup(self.nx, "-u", url, "unlock", "--force", key)
                    got = json.loads(self.nx("-u", url, "--json", "status", key).stdout)
                    self.assertEqual((got["kind"], got["shared_holders"]), ("exclusive", 0), got)
                    listed = json.loads(self.nx("-u", url, "--json", "list", key).stdout)
                    self.assertEqual([lock["value"] for lock in listed["locks"]], [value], listed)
                    for command in (("renew", "-t", "60"), ("unlock",)):
                        r = self.nx("-u", url, *command, key, old["value"])
                        self.assertNotEqual(r.returncode, 0, (command, r.stdout, r.stderr))
                        self.assertEqual(self.nx("-u", url, "get", key).stdout.decode().strip(), value)

    def test_a_value_renewed_away_names_its_lease_no_more(self):
        # `renew` prints the lease's new value; the one it replaced is another
        # value now, as an exclusive holder's is (the man page's exit 1,
        # held_by_other): it neither renews the live lease nor releases it.
        for backend in self.shared_backends("slots"):
            for kind in (("--shared",), ("--slots", "2")):
                with self.subTest(backend=backend.name, kind=kind[0]):
                    url = backend.url
                    key = "renewed" + kind[0]
                    r = self.lock(url, "-n", "-t", "60", *kind, key=key)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    old = json.loads(r.stdout)["value"]
                    r = self.nx("-u", url, "--json", "renew", "-t", "3600", key, old)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    new = json.loads(r.stdout)["value"]
                    self.addCleanup(self.nx, "-u", url, "unlock", "--force", key)
                    self.assertNotEqual(new, old)
                    for command, done in ((("renew", "-t", "3600"), "renewed"),
                                          (("unlock",), "released")):
                        r = self.nx("-u", url, "--json", *command, key, old)
                        self.assertEqual(r.returncode, 1, (command, r.stdout, r.stderr))
                        got = json.loads(r.stdout)
                        self.assertEqual((got[done], got["reason"]), (False, "held_by_other"))
                        self.assertIn(b"held by another value", r.stderr)
                    status = json.loads(self.nx("-u", url, "--json", "status", key).stdout)
                    self.assertEqual([h["value"] for h in status["shared"]], [new], status)
                    r = self.nx("-u", url, "unlock", key, new)
                    self.assertEqual(r.returncode, 0, r.stderr)

    def test_status_and_list_see_the_leases_renewed_under_them(self):
        # The key and its leases are read as one step: read apart, a renewal between
        # the two reads made a live set look lost, and `status` call it exclusive.
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                self.hold(url, "--shared", "-t", "50")
                mine = self.hold(url, "--shared", "-t", "100")["value"]
                stop = threading.Event()
                renewed = []

                def renew_all_the_time(value=mine):
                    # Each renewal moves the latest lease, and so the key.
                    while not stop.is_set():
                        ttl = "100" if len(renewed) % 2 else "200"
                        r = self.nx("-u", url, "--json", "renew", "-t", ttl, KEY, value)
                        if r.returncode != 0:
                            renewed.append(r.stderr)
                            return
                        value = json.loads(r.stdout)["value"]
                        renewed.append(value)
                    self.nx("-u", url, "unlock", KEY, value)

                renewer = threading.Thread(target=renew_all_the_time)
                renewer.start()
                seen = []
                try:
                    deadline = time.monotonic() + 3
                    while time.monotonic() < deadline:
                        got = json.loads(self.nx("-u", url, "--json", "status", KEY).stdout)
                        seen.append((got.get("kind"), got.get("shared_holders")))
                        listed = json.loads(self.nx("-u", url, "--json", "list", KEY).stdout)
                        seen.append(("list", len(listed["locks"])))
                finally:
                    stop.set()
                    renewer.join(timeout=30)
                self.assertGreater(len(renewed), 20, renewed[-1:])
                wrong = [s for s in seen if s not in (("shared", 2), ("list", 2))]
                self.assertEqual(wrong, [], "%d of %d reads" % (len(wrong), len(seen)))

    def test_run_locked_contention(self):
        """Shared sections overlap one another; no exclusive section overlaps any."""
        for backend in self.shared_backends():
            with self.subTest(backend=backend.name):
                url = backend.url
                log = os.path.join(self.tmp, "log-" + backend.name)
                script = ('echo "start $0 $NXLOCK_FENCE" >> "$1"; sleep 0.3; '
                          'echo "end $0" >> "$1"')
                procs = []
                for i in range(6):
                    kind = "x" if i % 3 == 0 else "s"
                    options = ["--shared"] if kind == "s" else []
                    procs.append(self.popen("-u", url, "run-locked", *options, "-w", "60",
                                            "-t", "10", KEY, "sh", "-c", script,
                                            "%s%d" % (kind, i), log, stderr=subprocess.PIPE))
                for p in procs:
                    _, err = p.communicate(timeout=90)
                    self.assertEqual(p.returncode, 0, err)
                with open(log) as f:
                    events = [line.split() for line in f]
                active = set()
                fences = []
                for event in events:
                    name = event[1]
                    if event[0] == "start":
                        if name.startswith("x"):
                            self.assertEqual(active, set(), events)
                        else:
                            self.assertFalse(any(a.startswith("x") for a in active), events)
                        active.add(name)
                        fences.append(int(event[2]))
                    else:
                        active.remove(name)
                self.assertEqual(len(set(fences)), 6)
                # An exclusive holder's token is above every earlier holder's and below
                # every later one's (shared ones may log their starts out of order).
                starts = [e for e in events if e[0] == "start"]
                for i, event in enumerate(starts):
                    if event[1].startswith("x"):
                        mine = int(event[2])
                        self.assertTrue(all(int(e[2]) < mine for e in starts[:i]), events)
                        self.assertTrue(all(int(e[2]) > mine for e in starts[i + 1:]), events)

    def test_bad_input(self):
        url = "file://" + self.store_path
        r = self.nx("-u", url, "--json", "lock", "-n", KEY)
        value = json.loads(r.stdout)["value"]
        self.addCleanup(self.nx, "-u", url, "unlock", KEY, value)
        # A quorum has no shared holders.
        r = self.nx("-u", self.redis.url + "/1", "-u", self.redis.url + "/2", "-u",
                    self.redis.url + "/3", "lock", "--shared", "-n", KEY)
        self.assertOneLineError(r, 64, "--shared")
        # The leases' key is no lock name.
        r = self.nx("-u", url, "lock", "-n", side_key(KEY, "shared"))
        self.assertOneLineError(r, 64, "companion")
        # A shared value whose lease is gone is not released.
        r = self.nx("-u", url, "unlock", "other", "1:s0123456789abcdef")
        self.assertEqual(r.returncode, 1, r.stderr)


class TestSharedCluster(WithCluster, SharedCase):
    def test_shared_and_exclusive_on_every_node(self):
        url = self.cluster.url()
        for node in self.cluster.nodes:
            key = self.cluster.key_on(node)
            with self.subTest(node=node.port):
                a = self.hold(url, "--shared", "-t", "60", key=key)
                b = self.hold(url, "--shared", "-t", "60", key=key)
                r = self.lock(url, "-n", "-t", "60", key=key)
                self.assertEqual(r.returncode, 75, r.stderr)
                for got in (a, b):
                    r = self.nx("-u", url, "unlock", key, got["value"])
                    self.assertEqual(r.returncode, 0, r.stderr)
                c = self.hold(url, "-t", "60", key=key)
                self.assertGreater(c["fence"], b["fence"])


if __name__ == "__main__":
    unittest.main()
