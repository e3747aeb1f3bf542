"""A client ("host") of the workload: runs `nxlock run-locked` on one key in a loop, each
time with a job (job.py) of a random length, and logs each run's exit status.

A run still going after its bound is a hang: it is killed (nxlock and everything
below it, by pid) and logged with "hang": true.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

import processes

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.py")
# Statuses after which the next try waits a little: the backend refused or was away.
_BACK_OFF = {64, 65, 69, 70, 77, 78}


class Client(threading.Thread):
    """Client `name` of lock `lock`: `nxlock GLOBAL run-locked -w WAIT -t TTL KEY job...`.

    `wrapper` goes before nxlock (faketime), `netns` is the namespace it runs in,
    `seconds` the range of its jobs' lengths, `ignore_term` makes its jobs ignore SIGTERM,
    `kind` the hold it takes: "exclusive", "shared" (--shared) or "slots:N" (--slots N)."""

    def __init__(self, scenario, name, lock, global_args, ttl=2, wait=15, seconds=(0.3, 3.0),
                 wrapper=(), netns=None, env=None, ignore_term=False, extra_args=(),
                 kind="exclusive"):
        super().__init__(name="%s/%s" % (scenario.name, name), daemon=True)
        self.scenario = scenario
        self.client = name
        self.lock = lock
        self.global_args = list(global_args)
        self.ttl = ttl
        self.wait = wait
        self.seconds = seconds
        self.wrapper = list(wrapper)
        self.netns = netns
        self.env = env
        self.ignore_term = ignore_term
        self.extra_args = list(extra_args)
        self.kind = kind
        if kind == "shared":
            self.extra_args.append("--shared")
        elif kind.startswith("slots:"):
            self.extra_args += ["--slots", kind.split(":")[1]]
        self.current = None  # the running nxlock's Popen, and when it started
        self.current_started = None
        self.stopping = threading.Event()
        self.log_path = os.path.join(scenario.dir, "%s.stderr" % name)

    @property
    def bound(self):
        """How long one run may take before it is a hang: the wait, the longest job, a pause
        and the default --kill-after, with room to spare."""
        return self.wait + self.seconds[1] + 2 * self.ttl + 10 + 45

    def command(self, seconds):
        key = "nemesis-" + self.lock
        job = [sys.executable, "-S", JOB, self.scenario.resource(self.lock),
               self.scenario.history.path, self.lock, self.client, "%.3f" % seconds]
        if self.ignore_term:
            job.append("--ignore-term")
        if self.kind != "exclusive":
            job += ["--kind", self.kind]
        return [*self.wrapper, self.scenario.nxlock, *self.global_args, "run-locked",
                "-w", str(self.wait), "-t", str(self.ttl), *self.extra_args, key, "--", *job]

    def run_once(self):
        """One run-locked; its exit status (None for a hang)."""
        seconds = random.uniform(*self.seconds)
        with open(self.log_path, "ab") as log:
            started = time.monotonic()
            process = processes.start(self.command(seconds), netns=self.netns, stderr=log,
                                      env=self.env)
            self.current, self.current_started = process, started
            hang = False
            try:
                status = process.wait(timeout=self.bound)
            except subprocess.TimeoutExpired:
                hang = True
                processes.kill_tree(process)
                status = None
            self.current = None
        self.scenario.history.append({"ev": "run", "client": self.client, "lock": self.lock,
                                      "pid": process.pid, "status": status, "hang": hang,
                                      "t0": started})
        return status

    def run(self):
        while not self.stopping.is_set() and not self.scenario.aborted.is_set():
            status = self.run_once()
            if status in _BACK_OFF:
                self.stopping.wait(0.2)

    def stop(self):
        """Ends the loop; a run still waiting for the lock is told to give up (SIGTERM,
        which a run holding the lock forwards to its job)."""
        self.stopping.set()
        process = self.current
        if process is not None and process.poll() is None:
            processes.signal_pid(process.pid, signal.SIGTERM)
