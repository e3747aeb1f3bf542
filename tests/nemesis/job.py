#!/usr/bin/env python3
"""The critical section the nemesis clients run under `nxlock run-locked`.

usage: job.py RESOURCE HISTORY LOCK CLIENT SECONDS [--ignore-term] [--kind KIND]

KIND is the hold run-locked took: exclusive (the default), shared, or slots:N (then the
slot comes from NXLOCK_SLOT); the checker lets shared sections overlap, and up to N slot
sections in distinct slots.

Its first write to the fenced resource is the section's start; it then writes every
TICK until SECONDS have passed on CLOCK_MONOTONIC (a pause past that ends it after
one more write, refused if a later holder wrote meanwhile), and logs its end. SIGTERM
logs the end and exits 143; with --ignore-term SIGTERM is ignored, as `trap '' TERM`
does. SIGKILL cannot be logged: the checker takes the last write as the end, at most
one TICK early. The time comes from time.monotonic(), CLOCK_MONOTONIC, which
libfaketime leaves alone under FAKETIME_DONT_FAKE_MONOTONIC=1.
"""
import os
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fenced import FencedResource  # noqa: E402

TICK = 0.05


def main():
    resource_path, history_path, lock, client, seconds = sys.argv[1:6]
    ignore_term = "--ignore-term" in sys.argv[6:]
    kind = sys.argv[sys.argv.index("--kind") + 1] if "--kind" in sys.argv[6:] else "exclusive"
    fence = os.environ.get("NXLOCK_FENCE")
    token = int(fence) if fence and fence.isdigit() else None
    base = {"lock": lock, "client": client, "pid": os.getpid(), "fence": token,
            "section": os.urandom(8).hex()}
    if kind != "exclusive":
        slot = os.environ.get("NXLOCK_SLOT", "")
        base.update(kind=kind.split(":")[0], slots=int(kind.split(":")[1]) if ":" in kind else None,
                    slot=int(slot) if slot.isdigit() else None)
    resource = FencedResource(resource_path, history_path)

    def on_term(_signo, _frame):
        resource.note(dict(base, ev="end", why="term"))
        os._exit(143)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore_term else on_term)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])

    resource.attempt(token, dict(base, ev="start", planned=float(seconds)))
    deadline = time.monotonic() + float(seconds)
    while True:
        # Not time.sleep: under libfaketime with FAKETIME_DONT_FAKE_MONOTONIC=1 its
        # clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) fails with EINVAL (0.9.10).
        select.select([], [], [], TICK)
        resource.attempt(token, dict(base, ev="write"))
        if time.monotonic() >= deadline:
            break
    resource.note(dict(base, ev="end", why="done"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
