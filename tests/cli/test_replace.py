"""run-locked --replace: a later run asks the holder to stop its job and takes the
lock once the old job is gone, never beside it (man page, run-locked --replace),
on every backend that offers it (harness.backends)."""
import json
import os
import subprocess
import time
import unittest

from harness import NxlockTestCase, read, side_key, smoke, wait_for

TTL = 6
INTERVAL = TTL / 3  # the holder looks for a request at each renewal, at the latest
MARGIN = 1.0  # slack for a loaded machine on every timing bound

# The old job: says when it starts and ends, on SIGTERM exits (trap), and while
# it runs stamps LOG every 50 ms (date's wall clock, as the new job's stamp: one
# host, one clock).
STAMP = 'echo "$1 $(date +%s.%N)" >> "$LOG"'
EXITS_ON_TERM = ("stamp() { %s; }; trap 'stamp old-end; exit 0' TERM; stamp old-start; "
                 "while :; do sleep 0.05 & wait $!; stamp old; done") % STAMP.replace("$1", "$*")
# Ignores SIGTERM (the group's other members, its sleeps, die of it): only
# --kill-after's SIGKILL ends it.
IGNORES_TERM = ("stamp() { %s; }; trap '' TERM; stamp old-start; "
                "while :; do sleep 0.05; stamp old; done") % STAMP.replace("$1", "$*")
NEW_JOB = 'echo "new-start $(date +%s.%N)" >> "$LOG"'


def stamps(path):
    """[(word, time)] of LOG, in order."""
    out = []
    for line in read(path).splitlines():
        words = line.split()
        if len(words) == 2:
            out.append((words[0], float(words[1])))
    return out


class Replace(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def backends(self, offering="replace", **kwargs):
        kwargs.setdefault("by_default", ("file", "redis"))
        return super().backends(offering=offering, **kwargs)

    def log(self, backend, name="log"):
        return os.path.join(self.tmp, "%s-%s" % (backend.name, name))

    def env_with(self, log):
        env = dict(self.env)
        env["LOG"] = log
        return env

    def start_holder(self, backend, key, job, log, *options):
        """A run-locked holder of `key` running `job` (sh -c), once its job runs and
        its holder record says it can be asked."""
        holder = self.popen(*backend.args(), "--json", "run-locked", "-t", str(TTL), *options,
                            key, "-c", job, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=self.env_with(log))
        self.addCleanup(holder.stderr.close)
        self.addCleanup(holder.stdout.close)
        self.addCleanup(lambda: holder.poll() is None and holder.kill() or holder.wait())
        self.assertTrue(wait_for(lambda: "old-start" in read(log), 10), "the old job never ran")
        self.assertTrue(wait_for(lambda: self.holder_record(backend, key) is not None, 10))
        return holder

    def holder_record(self, backend, key):
        r = self.nx(*backend.args(), "--json", "status", key)
        return json.loads(r.stdout.decode().splitlines()[-1]).get("holder")

    def replace(self, backend, key, log, *options, timeout=60):
        began = time.monotonic()
        r = self.nx(*backend.args(), "--json", "run-locked", "-t", str(TTL), "--replace",
                    *options, key, "-c", NEW_JOB, env=self.env_with(log), timeout=timeout)
        return r, time.monotonic() - began

    def ended(self, holder):
        out, err = holder.communicate(timeout=30)
        return holder.returncode, json.loads(out.decode().splitlines()[-1]), err.decode()

    @smoke
    def test_a_job_that_exits_on_sigterm_is_replaced_within_a_third_of_the_ttl(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = self.log(backend)
                holder = self.start_holder(backend, "rjob", EXITS_ON_TERM, log)
                r, took = self.replace(backend, "rjob", log)
                self.assertEqual(r.returncode, 0, r.stderr)
                # At its next renewal at the latest (a wake-up is sooner).
                self.assertLess(took, INTERVAL + MARGIN, r.stderr)
                status, report, err = self.ended(holder)
                self.assertEqual(status, 79, err)
                self.assertEqual(report["reason"], "replaced")
                self.assertTrue(report["replaced"])
                self.assertIn("replaced by pid ", err)
                self.assertFalse(report["lost"])
                words = [w for w, _ in stamps(log) if w != "old"]
                self.assertEqual(words, ["old-start", "old-end", "new-start"], read(log))
                self.assertEqual(self.nx(*backend.args(), "status", "rjob").returncode, 1)

    def test_a_job_that_ignores_sigterm_is_replaced_only_after_kill_after(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = self.log(backend)
                holder = self.start_holder(backend, "rstuck", IGNORES_TERM, log,
                                           "--kill-after", "2")
                r, took = self.replace(backend, "rstuck", log)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreaterEqual(took, 2.0, r.stderr)  # SIGKILL's grace, all of it
                status, report, err = self.ended(holder)
                self.assertEqual(status, 79, err)
                self.assertEqual(report["reason"], "replaced")
                marks = stamps(log)
                old = [t for w, t in marks if w.startswith("old")]
                new = [t for w, t in marks if w == "new-start"]
                self.assertEqual(len(new), 1, read(log))
                self.assertLess(max(old), new[0], read(log))  # its last write, then the new
                self.assertGreaterEqual(new[0] - old[0], 2.0, read(log))

    def test_two_replacers_the_first_wins_the_other_exits_75(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = self.log(backend)
                holder = self.start_holder(backend, "rtwo", IGNORES_TERM, log,
                                           "--kill-after", "3")
                first = self.popen(*backend.args(), "run-locked", "-t", str(TTL), "--replace",
                                   "rtwo", "-c", NEW_JOB, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, env=self.env_with(log))
                self.addCleanup(first.stderr.close)
                self.addCleanup(lambda: first.poll() is None and first.kill())
                # The first has asked once the holder says so (it stops its job).
                self.assertTrue(wait_for(lambda: "replaced by" in self.holder_err(holder), 10))
                r, _ = self.replace(backend, "rtwo", log)
                self.assertOneLineError(r, 75, "another run-locked --replace (pid %d"
                                        % first.pid)
                _, first_err = first.communicate(timeout=30)
                self.assertEqual(first.returncode, 0, first_err)
                status, _, err = self.ended(holder)
                self.assertEqual(status, 79, err)
                self.assertEqual([w for w, _ in stamps(log) if w == "new-start"], ["new-start"])

    def holder_err(self, holder):
        """What the holder wrote on stderr so far (read without blocking)."""
        os.set_blocking(holder.stderr.fileno(), False)
        chunk = holder.stderr.read() or b""
        holder.seen_err = getattr(holder, "seen_err", "") + chunk.decode()
        return holder.seen_err

    def test_a_replacer_that_gives_up_withdraws_its_request(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = self.log(backend)
                # --kill-after 4: longer than the first replacer waits.
                holder = self.start_holder(backend, "rgive", IGNORES_TERM, log,
                                           "--kill-after", "4")
                r, took = self.replace(backend, "rgive", log, "-w", "1")
                self.assertEqual(r.returncode, 75, r.stderr)
                self.assertIn(b"gave up waiting", r.stderr)
                # Its request is gone: the next replacer is not told another is first.
                r, _ = self.replace(backend, "rgive", log, "-w", "20")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn(b"another run-locked --replace", r.stderr)
                status, _, err = self.ended(holder)
                self.assertEqual(status, 79, err)
                if "redis" in backend.offers:
                    request = side_key("rgive", "replace")
                    self.assertEqual(backend.redis_cli("EXISTS", request).strip(), b"0")

    def test_a_lock_holder_is_waited_for_and_said_so(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = self.log(backend)
                taken = self.nx(*backend.args(), "lock", "-t", "2", "rshell")
                self.assertEqual(taken.returncode, 0, taken.stderr)
                r, took = self.replace(backend, "rshell", log, "-w", "10")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(b"--replace cannot ask its holder", r.stderr)
                self.assertIn(b"waiting for it", r.stderr)
                self.assertGreaterEqual(took, 0.5)  # it expired first
                self.assertEqual([w for w, _ in stamps(log)], ["new-start"])

    def test_a_no_renew_holder_is_waited_for(self):
        for backend in self.backends():
            with self.subTest(backend=backend.name):
                log = self.log(backend)
                holder = self.popen(*backend.args(), "run-locked", "-t", "3", "--no-renew",
                                    "rnorenew", "-c", "sleep 2", stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
                self.assertTrue(wait_for(lambda: self.holder_record(backend, "rnorenew")
                                         is not None, 10))
                r, took = self.replace(backend, "rnorenew", log, "-w", "10")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(b"--replace cannot ask its holder", r.stderr)
                self.assertEqual(holder.wait(timeout=10), 0)  # never stopped

    def test_refused_with_shared_slots_and_n(self):
        for backend in self.backends_named("file"):
            for extra in (("--shared",), ("--slots", "2"), ("-n",)):
                with self.subTest(option=extra[0]):
                    r = self.nx(*backend.args(), "run-locked", "--replace", *extra, "rk", "true")
                    self.assertOneLineError(r, 64, "--replace", "cannot be used with")

    @smoke
    def test_refused_where_not_offered(self):
        for backend in super().backends(lacking="replace"):
            with self.subTest(backend=backend.name):
                r = self.nx(*backend.args(), "run-locked", "--replace", "rk", "true")
                self.assertOneLineError(r, 64, "--replace", "not available", "yet")


if __name__ == "__main__":
    unittest.main()
