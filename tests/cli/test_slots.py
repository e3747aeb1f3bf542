"""--slots N: a counting semaphore. At most N holders of a key at once, each in a
slot with a lock's every guarantee; slots go to waiters in arrival order; what
`lock` prints is what `unlock` and `renew` take; `status` shows every slot. On
every backend that takes --slots (harness.backends), and keys on every node of a
Redis Cluster.

Waiters are confirmed queued before the next one starts, so the order under
test is the order the test made; no assertion rests on timing but generous
upper bounds."""
import json
import os
import re
import subprocess
import time
import unittest

from harness import NxlockTestCase, read, smoke, wait_for
from deployments import WithCluster

KEY = "dump"
QUEUE = "{dump}:queue:dump"
SLOT_VALUE = re.compile(r"^([0-9]+):([0-9]+)$")


def read_value(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


class SlotsTestCase(NxlockTestCase):
    def take(self, backend, slots=2, *options):
        """`lock -n --slots`: the printed SLOT:VALUE, released when the test ends."""
        r = self.nx(*backend.args(), "lock", "-n", "-t", "60", "--slots", str(slots), *options,
                    KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        printed = r.stdout.decode().strip()
        self.assertRegex(printed, SLOT_VALUE)
        self.addCleanup(self.nx, *backend.args(), "unlock", "--slots", str(slots), KEY, printed)
        return printed



class TestSlots(SlotsTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    @smoke
    def test_n_holders_at_once_then_busy(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                first, second = self.take(backend), self.take(backend)
                self.assertEqual({first.split(":")[0], second.split(":")[0]}, {"1", "2"})
                r = self.nx(*backend.args(), "lock", "-n", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertEqual(r.stdout, b"")
                err = r.stderr.decode()
                self.assertIn("all 2 slots held", err)
                self.assertIn("slot 1 until", err)
                self.assertIn("slot 2 until", err)
                # A plain lock of the same name waits while slots are held: never a mix.
                r = self.nx(*backend.args(), "lock", "-n", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                # The printed value renews and releases its slot.
                r = self.nx(*backend.args(), "renew", "--slots", "2", "-t", "90", KEY, first)
                self.assertEqual(r.returncode, 0, r.stderr)
                renewed = r.stdout.decode().strip()
                self.assertEqual(renewed.split(":")[0], first.split(":")[0])
                self.assertGreater(int(renewed.split(":")[1]), int(first.split(":")[1]))
                r = self.nx(*backend.args(), "unlock", "--slots", "2", KEY, renewed)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.nx(*backend.args(), "unlock", "--slots", "2", KEY, renewed)
                self.assertEqual(r.returncode, 1, r.stderr)
                # The freed slot is the one the next taker gets.
                again = self.take(backend)
                self.assertEqual(again.split(":")[0], first.split(":")[0])

    def test_lock_json_names_the_slot(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                r = self.nx(*backend.args(), "--json", "lock", "-n", "--slots", "3", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = json.loads(r.stdout)
                self.assertEqual(got["slot"], 1)
                self.assertEqual(got["value"], "1:%d" % got["expires_at"])
                self.assertGreater(got["fence"], 0)
                r = self.nx(*backend.args(), "unlock", "--slots", "3", KEY, got["value"])
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_status_shows_every_slot(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                r = self.nx(*backend.args(), "status", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stdout.decode().splitlines(),
                                 ["0 of 2 slots held", "slot 1: free", "slot 2: free"])
                first = self.take(backend)
                r = self.nx(*backend.args(), "status", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 1, r.stderr)  # a slot is free: not busy
                out = r.stdout.decode()
                self.assertIn("1 of 2 slots held", out)
                self.assertIn("slot 1: held until", out)
                self.assertIn("value " + first, out)
                self.assertIn("slot 2: free", out)
                second = self.take(backend)
                r = self.nx(*backend.args(), "--json", "status", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)  # every slot held: busy
                got = json.loads(r.stdout)
                self.assertTrue(got["held"])
                self.assertEqual(got["slots_held"], 2)
                self.assertEqual([s["slot"] for s in got["slots"]], [1, 2])
                self.assertEqual([s["value"] for s in got["slots"]], [first, second])
                for s in got["slots"]:
                    self.assertEqual(s["state"], "held")
                    self.assertGreater(s["fence"], 0)
                    self.assertIn("pid", s["holder"])

    def test_bad_input_is_refused_with_one_line(self):
        backend = self.backend_named("file")
        for slots in ("0", "-1", "x", "1001", "99999999999999999999", ""):
            for command in (["lock", "-n"], ["status"], ["run-locked", "-n"]):
                with self.subTest(slots=slots, command=command[0]):
                    tail = ["true"] if command[0] == "run-locked" else []
                    r = self.nx(*backend.args(), *command, "--slots", slots, KEY, *tail)
                    self.assertOneLineError(r, 64, "--slots")
        for value, fragment in (("1795587227", "names no slot"), ("3:1795587227", "1..2"),
                                ("0:1795587227", "1..2"), (":1795587227", "names no slot"),
                                ("1:x", "not a lock value")):
            for command in ("unlock", "renew"):
                with self.subTest(value=value, command=command):
                    r = self.nx(*backend.args(), command, "--slots", "2", KEY, value)
                    self.assertOneLineError(r, 64, fragment)
        # A slot's key cannot be named as a lock.
        r = self.nx(*backend.args(), "lock", "-n", "{dump}:slot1:dump")
        self.assertOneLineError(r, 64, "companion")
        # A shared lock has no slots: --slots with --shared is refused, and nothing is taken.
        for command in (["lock", "-n"], ["run-locked", "-n"]):
            with self.subTest(command=command[0], shared=True):
                tail = ["true"] if command[0] == "run-locked" else []
                r = self.nx(*backend.args(), *command, "--slots", "2", "--shared", KEY, *tail)
                self.assertOneLineError(r, 64, "--slots", "--shared")
                r = self.nx(*backend.args(), "status", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 1, r.stderr)  # every slot free
        # Nor does a quorum take slots.
        r = self.nx("-u", self.redis.url, "-u", self.redis.url + "/3", "-u",
                    self.redis.url + "/4", "lock", "-n", "--slots", "2", KEY)
        self.assertOneLineError(r, 64, "--slots", "quorum")

    def test_run_locked_runs_at_most_n_jobs_at_once(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                log = os.path.join(self.tmp, "log-" + backend.name)
                job = ('echo "start $NXLOCK_SLOT $(date +%s%N)" >> "$1"; sleep 0.5; '
                       'echo "end $NXLOCK_SLOT $(date +%s%N)" >> "$1"')
                jobs = [self.popen(*backend.args(), "run-locked", "-w", "60", "--slots", "2",
                                   KEY, "sh", "-c", job, "job", log, stderr=subprocess.PIPE)
                        for _ in range(6)]
                for p in jobs:
                    _, err = p.communicate(timeout=120)
                    self.assertEqual(p.returncode, 0, err)
                with open(log) as f:
                    events = [line.split() for line in f]
                self.assertEqual(sum(1 for e in events if e[0] == "start"), 6)
                self.assertEqual(sum(1 for e in events if e[0] == "end"), 6)
                self.assertTrue(all(e[1] in ("1", "2") for e in events), events)
                running, most = set(), 0
                for kind, slot, _ in sorted(events, key=lambda e: (int(e[2]), e[0] == "start")):
                    if kind == "start":
                        self.assertNotIn(slot, running, events)  # one job per slot
                        running.add(slot)
                    else:
                        running.discard(slot)
                    most = max(most, len(running))
                self.assertLessEqual(most, 2, events)
                r = self.nx(*backend.args(), "status", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("0 of 2 slots held", r.stdout.decode())

    def test_a_lost_slot_stops_its_job(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                metrics = os.path.join(self.tmp, "metrics-" + backend.name)
                os.mkdir(metrics)
                p = self.popen(*backend.args(), "run-locked", "-t", "3", "--slots", "2",
                               "--metrics-dir", metrics, KEY, "sleep", "60",
                               stderr=subprocess.PIPE)
                self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
                wait_for(lambda: "1 of 2 slots held" in self.nx(
                    *backend.args(), "status", "--slots", "2", KEY).stdout.decode()
                    or p.poll() is not None, 20)
                self.assertIsNone(p.poll(), "run-locked ended before it held a slot")
                r = self.nx(*backend.args(), "unlock", "--force", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                _, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 79, err)
                self.assertIn("lock 'dump' slot 1 lost", err.decode())
                # One metrics file for the key, whichever slot ran.
                self.assertEqual([f for f in os.listdir(metrics) if f.endswith(".prom")],
                                 ["nxlock_dump.prom"])

    def test_a_forced_slot_holder_never_renews_the_next_holder_of_its_slot(self):
        # Slot values are SLOT:EXPIRY: after --force, the next holder of slot 1 whose
        # lease expires in the same second has the very value the forced one holds.
        # The forced job's renewal must not take that lease for its own: it is
        # stopped (79), and the next holder runs on.
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                key = "same-second-" + backend.name
                for attempt in range(5):  # until both take their slot in one second
                    values = []
                    jobs = []
                    for name in ("forced", "next"):
                        out = os.path.join(self.tmp, "%s-%s-%d" % (name, backend.name, attempt))
                        job = self.popen(*backend.args(), "run-locked", "-t", "3", "--slots", "1",
                                         key, "sh", "-c", 'echo "$NXLOCK_VALUE" > "$0"; sleep 30',
                                         out, stderr=subprocess.PIPE)
                        self.addCleanup(lambda j=job: j.poll() is None and (j.kill(), j.wait()))
                        jobs.append(job)
                        self.assertTrue(wait_for(lambda: read_value(out), 20), name)
                        values.append(read_value(out))
                        if name == "forced":
                            r = self.nx(*backend.args(), "unlock", "--force", key)
                            self.assertEqual(r.returncode, 0, r.stderr)
                    if values[0] == values[1]:
                        break
                    for job in jobs:
                        job.kill()
                        job.communicate()
                    self.nx(*backend.args(), "unlock", "--force", key)
                self.assertEqual(values[0], values[1], "never in one second")
                forced, following = jobs
                _, err = forced.communicate(timeout=30)
                self.assertEqual(forced.returncode, 79, err)
                time.sleep(3)  # a bound: a few renewals of the next holder, which keeps it
                self.assertIsNone(following.poll(), following.stderr.read() if following.poll()
                                  is not None else "")
                following.kill()
                following.communicate()
                self.nx(*backend.args(), "unlock", "--force", key)

    def test_slots_go_to_waiters_in_arrival_order(self):
        for backend in self.backends(offering=("slots", "queue")):
            with self.subTest(backend=backend.name):
                grants = os.path.join(self.tmp, "grants-" + backend.name)
                held = [self.take(backend), self.take(backend)]
                names = ["w%d" % i for i in range(5)]
                waiters = []
                for name in names:
                    before = self.queued(backend, QUEUE)
                    p = self.popen(*backend.args(), "run-locked", "-w", "60", "-t", "60",
                                   "--slots", "2", KEY, "sh", "-c",
                                   'echo "$0 $NXLOCK_FENCE $NXLOCK_SLOT" >> "$1"; sleep 0.3',
                                   name, grants, stderr=subprocess.PIPE)
                    self.addCleanup(lambda p=p: p.poll() is None and (p.kill(), p.wait()))
                    wait_for(lambda: self.queued(backend, QUEUE) > before or p.poll() is not None, 20)
                    self.assertIsNone(p.poll(), "waiter %s ended before it queued" % name)
                    waiters.append(p)
                # Slot 2 frees first, then slot 1: each goes to the first in line.
                # Slot 1 frees once slot 2 was granted: a first waiter woken for
                # slot 2 but scheduled late would otherwise find both free.
                for freed, printed in enumerate(reversed(held)):
                    r = self.nx(*backend.args(), "unlock", "--slots", "2", KEY, printed)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertTrue(wait_for(lambda: len(read(grants).splitlines()) > freed, 30),
                                    "no waiter took the slot freed")
                for p in waiters:
                    _, err = p.communicate(timeout=60)
                    self.assertEqual(p.returncode, 0, err)
                with open(grants) as f:
                    rows = [line.split() for line in f]
                # Tokens rise with every acquisition, whichever slot: their order
                # is the order the slots were taken in.
                rows.sort(key=lambda row: int(row[1]))
                self.assertEqual([row[0] for row in rows], names)
                self.assertEqual(rows[0][2], "2")  # the slot that freed first
                self.assertEqual(self.queued(backend, QUEUE), 0)


    def test_a_holder_of_another_kind_is_named(self):
        # No slot holds the key, and no waiter is in line: the busy report names
        # the holder that does, and its kind, for lock and run-locked alike.
        for backend in self.backends(offering=("slots", "shared")):
            with self.subTest(backend=backend.name):
                url = backend.args()
                r = self.nx(*url, "--json", "lock", "-n", "-t", "60", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                exclusive = json.loads(r.stdout)["value"]
                for command in (("lock", "-n"), ("run-locked", "-n")):
                    tail = ("true",) if command[0] == "run-locked" else ()
                    r = self.nx(*url, "--json", *command, "--slots", "2", KEY, *tail)
                    self.assertEqual(r.returncode, 75, r.stderr)
                    err = r.stderr.decode()
                    self.assertNotIn("first in line", err)
                    self.assertIn("by an exclusive holder, pid %d on " % os.getpid(), err)
                    got = json.loads(r.stdout)
                    self.assertNotIn("queued_ahead", got)
                    self.assertEqual((got["kind"], got["slots_held"], got["holder"]["pid"],
                                      got["held_until"]), ("exclusive", 0, os.getpid(),
                                                           int(exclusive)), got)
                # A shared taker is told the same.
                r = self.nx(*url, "lock", "-n", "--shared", KEY)
                self.assertIn("by an exclusive holder, pid %d on " % os.getpid(),
                              r.stderr.decode())
                self.assertEqual(self.nx(*url, "unlock", KEY, exclusive).returncode, 0)
                shared = []
                for _ in range(2):
                    r = self.nx(*url, "--json", "lock", "-n", "-t", "60", "--shared", KEY)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    shared.append(json.loads(r.stdout)["value"])
                    self.addCleanup(self.nx, *url, "unlock", KEY, shared[-1])
                r = self.nx(*url, "--json", "lock", "-n", "--slots", "2", KEY)
                self.assertEqual(r.returncode, 75, r.stderr)
                err = r.stderr.decode()
                self.assertNotIn("first in line", err)
                self.assertIn("by 2 shared holders: pid %d on " % os.getpid(), err)
                got = json.loads(r.stdout)
                self.assertNotIn("queued_ahead", got)
                self.assertEqual((got["kind"], got["slots_held"]), ("shared", 0), got)
                self.assertEqual(sorted(h["value"] for h in got["shared"]), sorted(shared))
                # And slot holders, as slots, to a shared taker and to --slots alike.
                for value in shared:
                    self.assertEqual(self.nx(*url, "unlock", KEY, value).returncode, 0)
                self.take(backend, 1)
                r = self.nx(*url, "--json", "lock", "-n", "--shared", KEY)
                self.assertIn("by 1 slot holder: pid %d on " % os.getpid(), r.stderr.decode())
                self.assertEqual(json.loads(r.stdout)["kind"], "slots")
                r = self.nx(*url, "--json", "lock", "-n", "--slots", "1", KEY)
                self.assertIn("all 1 slots held", r.stderr.decode())
                self.assertEqual(json.loads(r.stdout)["kind"], "slots")

class TestSlotValuesAsPrinted(SlotsTestCase):
    """A slot's value works as `lock --slots` printed it, without --slots; status
    and --force see a key held as slots."""

    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_values_status_and_force_without_slots(self):
        for backend in self.backends(offering="slots"):
            with self.subTest(backend=backend.name):
                first, second = self.take(backend), self.take(backend)
                r = self.nx(*backend.args(), "--json", "status", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                status = json.loads(r.stdout)
                self.assertEqual((status["kind"], status["shared_holders"]), ("slots", 2))
                self.assertEqual(sorted(h["value"] for h in status["shared"]),
                                 sorted([first, second]))
                r = self.nx(*backend.args(), "renew", KEY, second)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.decode().split(":")[0], second.split(":")[0])
                r = self.nx(*backend.args(), "unlock", KEY, first)
                self.assertEqual(r.returncode, 0, r.stderr)
                # The bare timestamp is no holder's value while slots hold the key.
                bare = json.loads(self.nx(*backend.args(), "--json", "status", KEY).stdout)
                r = self.nx(*backend.args(), "unlock", KEY, bare["value"])
                self.assertOneLineError(r, 64, "slot holder", "SLOT:EXPIRY")
                r = self.nx(*backend.args(), "unlock", "--force", KEY)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = self.nx(*backend.args(), "status", KEY)
                self.assertEqual(r.returncode, 1, r.stderr)


class TestSlotsOnCluster(WithCluster, SlotsTestCase):
    def test_slots_on_a_cluster(self):
        from sentinel_harness import cli
        url = self.cluster.url(self.cluster.nodes[0])
        owner = self.cluster.owner(KEY)
        printed = []
        for _ in range(2):
            r = self.nx("-u", url, "lock", "-n", "--slots", "2", KEY)
            self.assertEqual(r.returncode, 0, r.stderr)
            printed.append(r.stdout.decode().strip())
        self.assertEqual(sorted(p.split(":")[0] for p in printed), ["1", "2"])
        # Every slot's lease lives on KEY's node, in its hash slot, beside KEY.
        for p in printed:
            slot, value = p.split(":")
            self.assertEqual(cli(owner.port, "ZSCORE", "{dump}:shared:dump", "#" + slot).strip(),
                             value)
        r = self.nx("-u", url, "lock", "-n", "--slots", "2", KEY)
        self.assertEqual(r.returncode, 75, r.stderr)
        r = self.nx("-u", url, "status", "--slots", "2", KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 of 2 slots held", r.stdout.decode())
        # A waiter is woken by the release of either slot.
        p = self.popen("-u", url, "run-locked", "-w", "60", "--slots", "2", KEY, "sh", "-c",
                       'echo "$NXLOCK_SLOT"', stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        wait_for(lambda: cli(owner.port, "ZCARD", QUEUE).strip() == "1" or p.poll() is not None,
                 20)
        r = self.nx("-u", url, "unlock", "--slots", "2", KEY, printed[1])
        self.assertEqual(r.returncode, 0, r.stderr)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.decode().strip(), printed[1].split(":")[0])


if __name__ == "__main__":
    unittest.main()
