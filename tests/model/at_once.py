#!/usr/bin/python3
"""The concurrent part of the model checker: several processes take random kinds of hold on
one key at once through `nxlock run-locked` (tests/nemesis/job.py as the job: it records
its section's start and end, $NXLOCK_FENCE and $NXLOCK_SLOT, writing to a fenced resource),
and the nemesis checker (tests/nemesis/checker.py) reads the history: no exclusive section
overlaps any other, at most N slot sections at once in distinct slots, tokens follow the
order of the holds. No fault is injected: any overlap or fencing violation fails.

usage: at_once.py BACKEND [--seconds S] [--clients C] [--seed N]
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "nemesis"))

import backends  # noqa: E402
import checker  # noqa: E402
import harness  # noqa: E402
from history import History  # noqa: E402

JOB = os.path.join(HERE, "..", "nemesis", "job.py")
SLOTS = 2
KEY = "ck"


def client(name, backend, directory, history, kinds, rng, until, statuses):
    """Runs run-locked on KEY with a random kind and job length until `until`."""
    while time.monotonic() < until:
        kind = rng.choice(kinds)
        args = {"exclusive": [], "shared": ["--shared"], "slots": ["--slots", str(SLOTS)]}[kind]
        job = [sys.executable, "-S", JOB, os.path.join(directory, "resource"), history.path,
               KEY, name, "%.2f" % rng.uniform(0.1, 0.8), "--kind",
               "slots:%d" % SLOTS if kind == "slots" else kind]
        started = time.monotonic()
        result = subprocess.run(harness.dying_with_parent(
                                    [harness.BIN, *backend.args(), "run-locked", "-w", "5",
                                     "-t", "2", *args, KEY, "--", *job]),
                                capture_output=True, env=backend.env(), timeout=60)
        history.append({"ev": "run", "client": name, "lock": KEY, "pid": 0, "kind": kind,
                        "status": result.returncode, "hang": False, "t0": started})
        statuses.append((kind, result.returncode, result.stderr.decode(errors="replace").strip()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("backend", choices=sorted(backends.BACKENDS))
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--seed", type=int, default=33)
    options = parser.parse_args()
    backend = backends.BACKENDS[options.backend]()
    directory = tempfile.mkdtemp(prefix="nxlock-model-concurrent-")
    history = History(os.path.join(directory, "history.jsonl"))
    # A quorum refuses --shared and --slots: its holders are all exclusive.
    kinds = ["exclusive"] if backend.quorum else ["exclusive", "shared", "shared", "slots", "slots"]
    statuses = []
    try:
        until = time.monotonic() + options.seconds
        threads = [threading.Thread(target=client, args=(
            "C%d" % i, backend, directory, history, kinds,
            random.Random(options.seed * 100 + i), until, statuses), daemon=True)
            for i in range(options.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        backend.stop()
    counts = checker.check(history.records())
    kinds_seen = {}
    for record in history.records():
        if record.get("ev") == "start":
            kind = record.get("kind", "exclusive")
            kinds_seen[kind] = kinds_seen.get(kind, 0) + 1
    unexpected = [s for s in statuses if s[1] not in (0, 75)]
    failed = counts["overlaps"] or counts["fenced_violations"] or unexpected or \
        counts["sections"] < options.clients
    print("concurrent %s: %d sections %s, %d overlaps, %d fenced violations, exits %s" % (
        options.backend, counts["sections"], kinds_seen, counts["overlaps"],
        counts["fenced_violations"], sorted({(k, s) for k, s, _ in statuses})))
    # The history is evidence only of a failure: kept then, removed otherwise.
    if failed:
        print("history kept: %s" % history.path)
    else:
        shutil.rmtree(directory)
    for example in counts["examples"][:10]:
        print("  " + example)
    for kind, status, err in unexpected[:5]:
        print("  %s run-locked exited %d: %s" % (kind, status, err))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
