"""run-locked against a real redis-server that restarts, stalls, drops idle clients, or
is cut off: the job keeps its lock through what heals in time, and is stopped before
another client can take a lock it could no longer renew.

Each test prints a MEASURE line (seen with `python3 -m unittest -v test_redis_faults`):
how the job fared, and how long after the server's return the first renewal landed.
"""
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import unittest

from faults import PartitionProxy, RestartableRedis
from harness import BIN, NxlockTestCase, die_with_parent, dying_with_parent, read, wait_for

JOB_DEADLINE = 40  # seconds: no test job may run longer than this


class Running:
    """nxlock in the background, its stderr lines kept with their arrival times."""

    def __init__(self, test, *args):
        self.started = time.monotonic()
        self.process = subprocess.Popen(dying_with_parent([BIN, *args]), env=test.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        test.addCleanup(self.kill)
        self.lines = []  # (monotonic time, text)
        self.stdout = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.process.stderr:
            self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def wait(self, timeout=JOB_DEADLINE):
        self.stdout = self.process.stdout.read()
        status = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return status

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stderr(self):
        return "\n".join(text for _, text in self.lines)

    def first_line(self, pattern, after=0.0):
        """The arrival time of the first stderr line matching `pattern` after `after`."""
        for when, text in list(self.lines):
            if when >= after and re.search(pattern, text):
                return when
        return None

    def wait_for_line(self, pattern, timeout=15.0):
        found = []

        def seen_or_ended():
            found[:] = [self.first_line(pattern)]
            return found[0] is not None or (self.process.poll() is not None
                                            and not self._reader.is_alive())
        if wait_for(seen_or_ended, timeout, interval=0.01) and found[0] is not None:
            return found[0]
        raise AssertionError("no stderr line matching %r; stderr so far:\n%s"
                             % (pattern, self.stderr()))


# -v traces each step: "SETNX key value → 1", and a renewal "SET-IF-EQUAL key old new → 1".
ACQUIRED = r"SETNX \S+ \d+ → 1"
RENEWED = r"SET-IF-EQUAL .* → 1"


def measure(text):
    print("\nMEASURE: " + text, file=sys.stderr, flush=True)


class RedisFaults(NxlockTestCase):
    def server(self, *extra):
        server = RestartableRedis(*extra)
        self.addCleanup(server.close)
        return server

    def run_locked(self, url, *args):
        return Running(self, "-v", "-u", url, "run-locked", *args)

    def assertKept(self, job, status, expected):
        err = job.stderr()
        self.assertEqual(status, expected, err)
        self.assertNotIn("lost", err)

    def test_restart_with_aof_keeps_the_job_and_releases(self):
        server = self.server("--appendonly", "yes", "--appendfsync", "always")
        # -t 4: the outage and the restart must fit in what renewal rides out
        # (from 1.3 s to 0.4 s before the lock's 4 s are up).
        job = self.run_locked(server.url, "-t", "4", "faulty", "sh", "-c", "sleep 7; exit 5")
        job.wait_for_line(ACQUIRED)
        time.sleep(0.5)  # a bound: half a second into the job
        server.stop()
        time.sleep(1.5)  # the fault lasts 1.5 s: across a renewal that falls due meanwhile
        self.assertTrue(server.start())
        back = time.monotonic()
        status = job.wait()
        self.assertKept(job, status, 5)
        self.assertEqual(server.get("faulty"), b"", "released at the end")
        renewed = job.first_line(RENEWED, after=back)
        self.assertIsNotNone(renewed, job.stderr())
        measure("AOF restart (down 1.5 s) during run-locked -t 4 of a 7 s job: exit %d after "
                "%.1f s; first renewal %.3f s after the server's return"
                % (status, time.monotonic() - job.started, renewed - back))

    def test_stall_longer_than_timeout_keeps_the_job(self):
        server = self.server("--enable-debug-command", "yes")
        job = self.run_locked(server.url, "--io-timeout", "2", "-t", "9", "stalled", "sleep", "8")
        acquired = job.wait_for_line(ACQUIRED)
        # Stall the server from 2 s to 6 s after the acquisition: the renewal due at
        # 3 s times out at 5 s (--io-timeout 2), and must be retried rather than count as a
        # lost lock. (A second of margin for redis-cli's start on a loaded machine.)
        time.sleep(max(0.0, acquired + 2.0 - time.monotonic()))  # a bound: 2 s after it
        stall = subprocess.Popen(["redis-cli", "-p", str(server.port), "DEBUG", "SLEEP", "4"],
                                 stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)
        stall.wait(timeout=15)
        back = time.monotonic()
        status = job.wait()
        self.assertKept(job, status, 0)
        self.assertEqual(server.get("stalled"), b"", "released at the end")
        # The stall made a renewal fail, and a later one succeeded. (Ordered by the
        # job's own lines, not by when redis-cli's exit was noticed here: the job may
        # renew the moment the server wakes, before that.)
        texts = [text for _, text in job.lines]
        failed = next((i for i, text in enumerate(texts) if "renewal failed" in text), None)
        self.assertIsNotNone(failed, job.stderr())
        later = [job.lines[i][0] for i in range(failed + 1, len(texts))
                 if re.search(RENEWED, texts[i])]
        self.assertTrue(later, job.stderr())
        renewed = later[0]
        measure("DEBUG SLEEP 4 with --io-timeout 2, run-locked -t 9 of an 8 s job: exit %d after "
                "%.1f s; first renewal %.3f s after the stall ended"
                % (status, time.monotonic() - job.started, renewed - back))

    def test_idle_client_timeout_shorter_than_the_renewal_interval(self):
        # The server drops clients idle for 2 s; renewals come every 3 s (-t 9).
        server = self.server("--timeout", "2")  # redis.conf timeout: idle clients closed after 2 s
        job = self.run_locked(server.url, "-t", "9", "idle", "sleep", "8")
        status = job.wait()
        self.assertKept(job, status, 0)
        self.assertEqual(server.get("idle"), b"", "released at the end")
        renewals = len([1 for _, text in job.lines if re.search(RENEWED, text)])
        self.assertGreaterEqual(renewals, 2, job.stderr())
        measure("server timeout 2, run-locked -t 9 of an 8 s job: exit %d after %.1f s, "
                "%d renewals, %d retried" % (status, time.monotonic() - job.started, renewals,
                                             job.stderr().count("renewal failed")))

    def test_restart_during_a_short_job_still_releases(self):
        server = self.server("--appendonly", "yes", "--appendfsync", "always")
        job = self.run_locked(server.url, "-t", "30", "short", "sleep", "2")
        job.wait_for_line(ACQUIRED)
        time.sleep(0.3)  # a bound: the restart comes while the short job runs
        server.restart()
        status = job.wait()
        self.assertKept(job, status, 0)
        self.assertEqual(server.get("short"), b"", "released at the end")
        again = self.nx("-u", server.url, "run-locked", "-n", "short", "true")
        self.assertEqual(again.returncode, 0, again.stderr)

    def test_waiter_rides_out_a_restart(self):
        server = self.server("--appendonly", "yes", "--appendfsync", "always")
        held = self.nx("-u", server.url, "lock", "-t", "60", "waited")
        self.assertEqual(held.returncode, 0, held.stderr)
        waiter = Running(self, "-v", "-u", server.url, "lock", "-w", "30", "-t", "60", "waited")
        waiter.wait_for_line(r"GET waited")
        server.restart()
        time.sleep(0.5)  # a bound: the waiter meets the restart, and keeps waiting
        self.assertIsNone(waiter.process.poll(), waiter.stderr())
        released = self.nx("-u", server.url, "unlock", "waited", held.stdout.strip())
        self.assertEqual(released.returncode, 0, released.stderr)
        self.assertEqual(waiter.wait(), 0, waiter.stderr())
        self.assertEqual(server.get("waited"), waiter.stdout.strip())

    def test_a_wrong_url_is_not_waited_on(self):
        server = self.server()
        port = server.port
        server.stop()
        started = time.monotonic()
        r = self.nx("-u", "redis://127.0.0.1:%d" % port, "lock", "-w", "30", "gone")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertLess(time.monotonic() - started, 10)

    def test_partitioned_holder_stops_before_another_can_take_the_lock(self):
        server = self.server()
        proxy = PartitionProxy(server.port)
        self.addCleanup(proxy.close)
        log = os.path.join(self.tmp, "job.log")
        job_script = textwrap.dedent("""\
            import signal, sys, time
            def stop(signo, frame):
                with open(sys.argv[1], "a") as f:
                    f.write("TERM %f\\n" % time.monotonic())
                sys.exit(0)
            signal.signal(signal.SIGTERM, stop)
            with open(sys.argv[1], "a") as f:
                f.write("START %f\\n" % time.monotonic())
            time.sleep(30)  # the job's length
            """)
        # --io-timeout 6 is longer than the lock's life (-t 3): the renewal must not wait that long.
        job = Running(self, "-v", "-u", proxy.url, "--io-timeout", "6", "run-locked", "-t", "3",
                      "--on-lost", "term", "cut", sys.executable, "-c", job_script, log)
        job.wait_for_line(ACQUIRED)
        self.assertTrue(wait_for(lambda: "START" in read(log), interval=0.01), "the job never started")
        proxy.partition()
        # Another client, with a direct line to the server, takes the lock as soon as it can.
        def take():
            other = self.nx("-u", server.url, "lock", "-n", "-t", "30", "cut")
            self.assertIn(other.returncode, (0, 75), other.stderr)
            return other.returncode == 0
        self.assertTrue(wait_for(take, 20, interval=0.05), "the other client never got the lock")
        taken = time.monotonic()
        status = job.wait()
        self.assertEqual(status, 79, job.stderr())
        terms = [float(line.split()[1]) for line in read(log).splitlines()
                 if line.startswith("TERM")]
        self.assertTrue(terms, "the job got no SIGTERM:\n" + job.stderr())
        self.assertLess(terms[0], taken, "the job was still running when another client "
                        "took the lock (%.2f s after it)" % (terms[0] - taken))
        measure("partitioned holder (--io-timeout 6, -t 3): SIGTERM %.2f s before another client "
                "took the lock" % (taken - terms[0]))


if __name__ == "__main__":
    unittest.main()
