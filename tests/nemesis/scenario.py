"""What every scenario shares: its temp dir and history, its clients, the round loop
(wait for a running section, inject the fault, let the system recover), teardown that
always runs, and the verdict from the checker.
"""
import os
import shutil
import sys
import tempfile
import time

import checker
import processes
from history import History

# The servers are started by tests/cli/servers.py (and the deployments built on it
# beside it), which the nemesis shares with the CLI tests and the model checker; each
# server it starts is registered with processes, for stop_all().
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import servers  # noqa: E402

servers.SERVER_STARTED.append(processes.adopt)

SECTION_WAIT = 30  # seconds a round waits for a section the fault can hit


class Skipped(Exception):
    """The scenario cannot run here (say why)."""


class Scenario:
    name = None
    expected_overlaps = False
    how = ""  # one line: how the fault is made (the table's notes and docs/NEMESIS.md)
    ttl = 2
    # Overlaps this short (seconds) are not failures, where a hold is taken away before
    # its expiry and its holder learns it at its next renewal (checker.py).
    overlap_allowance = 0.0

    def __init__(self, nxlock, min_rounds, seconds, keep=False):
        self.nxlock = nxlock
        self.min_rounds = min_rounds
        self.seconds = seconds  # make rounds for at least this long
        self.keep = keep  # keep the history even when the scenario passes
        self.dir = tempfile.mkdtemp(prefix="nxlock-nemesis-%s-" % self.name)
        self.history = History(os.path.join(self.dir, "history.jsonl"))
        self.clients = []
        self.aborted = processes.aborting  # Ctrl-C: one event for every scenario
        self.rounds = 0
        self.missed = 0
        self.notes = []
        self.servers = []  # anything with stop() or close(), stopped in reverse order
        self.torn_down = False

    def resource(self, lock):
        return os.path.join(self.dir, "resource-%s" % lock)

    # -- to override ---------------------------------------------------------------
    def setup(self):
        """Starts the servers and makes self.clients."""
        raise NotImplementedError

    def fault(self, round_number):
        """One round's fault; True if it hit a running section."""
        raise NotImplementedError

    def verdict_extra(self, result):
        """Scenario-specific failures (a list of reasons)."""
        return []

    # -- shared --------------------------------------------------------------------
    def wait_section(self, client=None, lock=None, planned=0.0, timeout=SECTION_WAIT):
        """Waits for a running section (of `client`, on `lock`, planned at least `planned`
        seconds, started within the last half second); returns (its Client, its start
        record), or (None, None) when none came within `timeout`."""
        found = []

        def running():
            now = time.monotonic()
            for start in self.history.follow():
                if now - start["t"] > 0.5 or start.get("planned", 0) < planned:
                    continue
                if (client and start["client"] != client) or (lock and start["lock"] != lock):
                    continue
                owner = next((c for c in self.clients if c.client == start["client"]), None)
                if owner is not None and owner.current is not None and \
                        owner.current.poll() is None and owner.current_started <= start["t"]:
                    found.append((owner, start))
                    return True
            return False
        # (wait_until stops early on an abort: self.aborted is processes.aborting.)
        processes.wait_until(running, timeout, interval=0.02)
        return found[0] if found else (None, None)

    def let_run(self, seconds):
        """The workload runs on for `seconds`: a fault's length, or the time the clients get
        to meet it or come back from it. Not a wait for something to happen: the checker
        judges the whole history afterwards."""
        time.sleep(seconds)

    def note_fault(self, what, **details):
        self.history.append(dict(details, ev="nemesis", what=what))

    def run(self):
        """Setup, rounds, teardown; the result (a dict) with the checker's counts."""
        started = time.monotonic()
        failure = None
        try:
            self.setup()
            for client in self.clients:
                client.start()
            round_number = 0
            while (self.rounds < self.min_rounds or time.monotonic() - started < self.seconds) \
                    and not self.aborted.is_set():
                if self.missed >= 3 and self.missed > self.rounds:
                    failure = "the fault found no running section in %d rounds" % self.missed
                    break
                if self.fault(round_number):
                    self.rounds += 1
                else:
                    self.missed += 1
                round_number += 1
        except Skipped as why:
            return self._skipped(str(why))
        except Exception as error:  # the harness failed: say so, never pass
            failure = "harness error: %r" % (error,)
        finally:
            self._teardown()
        return self._result(failure, time.monotonic() - started)

    def _teardown(self):
        if self.torn_down:
            return
        self.torn_down = True
        for client in self.clients:
            client.stop()
        for client in self.clients:
            if client.is_alive():
                client.join(timeout=client.bound + 5)
        for server in reversed(self.servers):
            try:
                (server.stop if hasattr(server, "stop") else server.close)()
            except Exception:
                pass
        self.history.close()

    def _result(self, failure, elapsed):
        counts = checker.check(self.history.records(), self.overlap_allowance)
        result = {"name": self.name, "rounds": self.rounds, "sections": counts["sections"],
                  "overlaps": counts["overlaps"], "brief_overlaps": counts["brief_overlaps"],
                  "fenced_violations": counts["fenced_violations"],
                  "stopped": counts["stopped"], "hangs": counts["hangs"],
                  "expected_overlaps": self.expected_overlaps}
        reasons = [failure] if failure else []
        if self.rounds < self.min_rounds and not failure:
            reasons.append("only %d of %d rounds" % (self.rounds, self.min_rounds))
        if counts["fenced_violations"]:
            reasons.append("%d fenced violations" % counts["fenced_violations"])
        if counts["hangs"]:
            reasons.append("%d hangs" % counts["hangs"])
        if counts["overlaps"] and not self.expected_overlaps:
            reasons.append("%d overlaps where none may be" % counts["overlaps"])
        if any(c.is_alive() for c in self.clients):
            reasons.append("a client did not finish")
        reasons += self.verdict_extra(counts)
        if counts["brief_overlaps"]:
            self.notes.append("%d overlaps of %.2f s or less, each a hold taken away and "
                              "learnt at the holder's next renewal (not counted)"
                              % (counts["brief_overlaps"], self.overlap_allowance))
        extra = {"failures": reasons, "statuses": counts["statuses"],
                 "examples": counts["examples"], "notes": self.notes, "how": self.how,
                 "seconds": round(elapsed, 1), "history": None}
        if reasons or self.keep:
            extra["history"] = self.history.path  # kept for reading
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return result, extra

    def _skipped(self, why):
        self._teardown()
        shutil.rmtree(self.dir, ignore_errors=True)
        result = {"name": self.name, "rounds": 0, "sections": 0, "overlaps": 0,
                  "brief_overlaps": 0, "fenced_violations": 0, "stopped": 0, "hangs": 0,
                  "expected_overlaps": self.expected_overlaps, "skipped": True}
        return result, {"failures": [], "statuses": {}, "examples": [], "how": self.how,
                        "notes": ["skipped: " + why], "seconds": 0, "history": None}
