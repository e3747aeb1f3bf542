#!/usr/bin/env python3
"""Runs one contention round: N workers race for one lock; writes wall time and handoffs as JSON.

usage: contention.py --name NAME --workers N --sections S --log LOG --out OUT.json
                     [--loop] -- COMMAND [ARGS...]

With --loop every worker runs COMMAND S times in a row (nxlock run-locked, flock);
without it COMMAND is the worker itself and runs its S sections (the shell client).
Either way each critical section is one exec of bench/section, which appends
"enter <ns> <pid>" and "exit <ns> <pid>" to LOG. A handoff is the time from one
section's exit to the next section's enter, over the log sorted by time: it holds
the release, the waiter's wake-up and retry, and its fork+exec of the section, the
same for every lock. The log is also checked for mutual exclusion.
"""
import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def start_worker(command):
    def child_setup():
        # Own process group (killed as one below), and dead with us if we are killed.
        os.setpgid(0, 0)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=child_setup)


def stop_group(worker):
    """Kills a worker's process group and waits until every process in it is gone."""
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    for _ in range(100):
        try:
            os.killpg(worker.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def analyse(log_path):
    """Sorted sections from the log: (enter_ns, exit_ns) pairs, and overlaps found."""
    events = []
    with open(log_path) as log:
        for line in log:
            what, ns, pid = line.split()
            events.append((int(ns), 0 if what == "exit" else 1, what, pid))
    events.sort()  # an exit and an enter in the same ns: the exit first
    sections, overlaps, holder = [], 0, None
    for ns, _, what, pid in events:
        if what == "enter":
            if holder is not None:
                overlaps += 1  # two holders at once: the lock failed
            holder = (pid, ns)
        else:
            if holder is None or holder[0] != pid:
                overlaps += 1
            else:
                sections.append((holder[1], ns))
            holder = None
    return sections, overlaps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--sections", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--loop", action="store_true")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()

    if args.loop:
        command = ["bash", "-c", 'n=$1; shift; for ((i = 0; i < n; i++)); do "$@"; done',
                   "worker", str(args.sections), *args.command]
    else:
        command = args.command

    # bench/run stops us with SIGTERM on Ctrl-C: unwind through `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    workers = []
    try:
        started = time.monotonic()
        workers = [start_worker(command) for _ in range(args.workers)]
        statuses = [worker.wait() for worker in workers]
        wall = time.monotonic() - started
    finally:
        for worker in workers:
            if worker.poll() is None:
                stop_group(worker)

    sections, overlaps = analyse(args.log)
    handoffs = [sections[i + 1][0] - sections[i][1] for i in range(len(sections) - 1)]
    result = {
        "name": args.name,
        "wall_s": wall,
        "sections": len(sections),
        "expected_sections": args.workers * args.sections,
        "overlaps": overlaps,
        "worker_statuses": statuses,
        "handoffs_ns": handoffs,
    }
    with open(args.out, "w") as out:
        json.dump(result, out)
    if overlaps or len(sections) != args.workers * args.sections or any(statuses):
        print("contention %s: %d/%d sections, %d overlaps, worker statuses %s"
              % (args.name, len(sections), args.workers * args.sections, overlaps, statuses),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
