"""A job never outlives its lock, against real servers.

A holder cut off from Redis must not give a child that ignores SIGTERM the whole
--kill-after before SIGKILL, past the lock's expiry; with nxlock alone
SIGSTOPped, its watchdog must stop the job before the next holder can start. The job (lost_policy_job.py) ignores SIGTERM as `trap "" TERM` does,
has a grandchild in its group, and logs a heartbeat against CLOCK_MONOTONIC and
the Unix time; the lock's value says when other clients may take it.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

from faults import RestartableRedis
from harness import BIN, NxlockTestCase, RedisServer, alive, dying_with_parent, read, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "lost_policy_job.py")
TTL = 3
# The heartbeat's period and then some: a process is gone this soon after its last tick.
TICK_SLACK = 0.1

# The second holder's job: when it starts, and whether the first job's processes
# still ran then.
SECOND_JOB = """
import os, sys, time
started = time.monotonic()
def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
with open(sys.argv[1], "w") as f:
    f.write("%.6f %s\\n" % (started, " ".join(str(alive(int(p))) for p in sys.argv[2:])))
"""


class JobLog:
    """One process's log from lost_policy_job.py: pid, start, heartbeat (monotonic, wall)."""

    def __init__(self, path):
        self.pid = None
        self.ticks = []
        for line in read(path).splitlines():
            words = line.split()
            if words[0] == "start":
                self.pid = int(words[1])
            elif words[0] == "tick" and len(words) == 3:
                self.ticks.append((float(words[1]), float(words[2])))

    def last_tick(self):
        """(monotonic, wall) of the last heartbeat."""
        return self.ticks[-1] if self.ticks else (None, None)


class Holder:
    """`nxlock -v --json URL_ARGS run-locked -t TTL OPTIONS KEY job`, its stderr read as it comes."""

    def __init__(self, test, url_args, key, options):
        self.logdir = os.path.join(test.tmp, "job-" + str(len(os.listdir(test.tmp))))
        os.makedirs(self.logdir)
        self.lines = []
        self.exited_at = None
        self.launched = time.monotonic()
        self.process = subprocess.Popen(
            dying_with_parent([BIN, "-v", "--json", *url_args, "run-locked", "-t", str(TTL),
                               *options, key, sys.executable, JOB, self.logdir,
                               "--on-term", "ignore", "--grandchild"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=test.env)
        test.addCleanup(self.close)
        self.threads = [threading.Thread(target=self._read_stderr),
                        threading.Thread(target=self._wait)]
        for thread in self.threads:
            thread.start()

    def _read_stderr(self):
        for line in self.process.stderr:
            self.lines.append(line.decode(errors="replace"))

    def _wait(self):
        self.process.wait()
        self.exited_at = time.monotonic()

    def stderr(self):
        return "".join(self.lines)

    def logs(self):
        return (JobLog(os.path.join(self.logdir, "child.log")),
                JobLog(os.path.join(self.logdir, "grandchild.log")))

    def job_started(self):
        return all(log.pid and log.ticks for log in self.logs())

    def holder_records(self):
        """How many holder records were written: one at the start, then one with each
        renewal, as its last store step (per server, on a quorum)."""
        return sum("acquired_at" in line and "\u2192" in line for line in self.lines)

    def wait_exit(self, timeout):
        if not wait_for(lambda: self.exited_at is not None, timeout=timeout):
            return None
        return self.process.returncode

    def report(self):
        self.threads[1].join()
        return json.loads(self.process.stdout.read() or b"{}")

    def close(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()  # its watchdog then stops the whole job
        for thread in self.threads:
            thread.join(timeout=30)
        for log in self.logs():
            if log.pid and not wait_for(lambda: not alive(log.pid), timeout=5):
                os.kill(log.pid, signal.SIGKILL)
        self.process.stdout.close()
        self.process.stderr.close()


class JobDeadline(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def assertGoneBefore(self, holder, free_at, why):
        """Every process of the job is gone, and its last heartbeat came before `free_at`
        (Unix time): the moment other clients see the lock expired."""
        for log in holder.logs():
            self.assertTrue(wait_for(lambda: not alive(log.pid), timeout=10),
                            "process %d of the job outlived nxlock" % log.pid + why)
            _, wall = log.last_tick()
            print("\nMEASURE: process %d of the job last ran %.2f s before the lock could be "
                  "taken" % (log.pid, free_at - wall), file=sys.stderr, flush=True)
            self.assertLess(wall + TICK_SLACK, free_at,
                            "process %d last ran %.2f s before the lock could be taken "
                            "(negative: after)" % (log.pid, free_at - wall) + why)

    def test_sigterm_ignoring_job_is_killed_before_the_lock_expires(self):
        # The holder loses its Redis (stopped); --kill-after 30 would
        # leave the job running for 30 s past the loss.
        redis = RestartableRedis()
        self.addCleanup(redis.close)
        self.addCleanup(lambda: redis.process.send_signal(signal.SIGCONT))
        holder = Holder(self, ["-u", redis.url], "cut", ["--kill-after", "30"])
        self.assertTrue(wait_for(lambda: holder.holder_records() and holder.job_started(),
                                 timeout=20), "the job did not start:\n" + holder.stderr())
        redis.process.send_signal(signal.SIGSTOP)
        status = holder.wait_exit(timeout=60)
        redis.process.send_signal(signal.SIGCONT)
        why = "\nstderr:\n" + holder.stderr()
        self.assertEqual(status, 79, why)
        # The last value written (a lost lock is not released): other clients
        # see it expired once the time in whole seconds is above it.
        got = self.nx("-u", redis.url, "get", "cut")
        self.assertEqual(got.returncode, 0, got.stderr)
        free_at = int(got.stdout) + 1
        self.assertGoneBefore(holder, free_at, why)
        self.assertIn("lost", holder.stderr(), why)
        self.assertIn("cut short", holder.stderr(), "stderr says the grace was cut short" + why)
        self.assertEqual(holder.report().get("lost"), True, why)

    def test_stopped_nxlock_cannot_leave_its_job_running(self):
        # nxlock alone is stopped; its watchdog and the job are not.
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                self.check_stopped_holder(backend.args())

    def test_stopped_nxlock_cannot_leave_its_job_running_on_a_quorum(self):
        # The quorum's validity is shorter than the ttl (its drift margin): the
        # watchdog's deadline is that validity, as the renewal computes it.
        url_args = []
        for _ in range(3):
            server = RedisServer()
            self.addCleanup(server.stop)
            url_args += ["-u", server.url]
        self.check_stopped_holder(url_args)

    def check_stopped_holder(self, url_args):
        first = Holder(self, url_args, "paused", [])
        self.assertTrue(wait_for(lambda: first.holder_records() and first.job_started(),
                                 timeout=20), "the job did not start:\n" + first.stderr())
        # Stopped between store steps (a stop inside one would keep the embedded
        # store's stripe lock from everyone): right after a renewal's holder
        # record, a third of the ttl before the next renewal.
        records = first.holder_records()
        wait_for(lambda: first.holder_records() > records, timeout=TTL)
        first.process.send_signal(signal.SIGSTOP)
        status = self.nx(*url_args, "--json", "status", "paused")
        self.assertEqual(status.returncode, 0, status.stderr)
        free_at = int(json.loads(status.stdout)["value"]) + 1

        # The next holder waits for the lock and records when its job starts.
        started_log = os.path.join(self.tmp, "second-" + str(time.monotonic()))
        pids = [str(log.pid) for log in first.logs()]
        second = self.nx(*url_args, "run-locked", "-w", "30", "-t", "30", "paused",
                         sys.executable, "-c", SECOND_JOB, started_log, *pids, timeout=60)
        why = "\nfirst holder's stderr:\n" + first.stderr() + "\nsecond's:\n" + \
            second.stderr.decode(errors="replace")
        self.assertEqual(second.returncode, 0, why)
        words = read(started_log).split()
        second_started = float(words[0])
        self.assertEqual(words[1:], ["False", "False"],
                         "the first job's processes still ran when the second job started"
                         + why)
        for log in first.logs():
            self.assertLess(log.last_tick()[0], second_started, "the jobs overlapped" + why)
        self.assertGoneBefore(first, free_at, why)

        first.process.send_signal(signal.SIGCONT)
        self.assertEqual(first.wait_exit(timeout=30), 79, "\n" + first.stderr())
        self.assertIn("lost", first.stderr())
        self.assertEqual(first.report().get("lost"), True)


if __name__ == "__main__":
    unittest.main()
