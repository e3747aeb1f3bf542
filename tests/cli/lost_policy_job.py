#!/usr/bin/env python3
"""A job for test_lost_policy.py: logs its start, a heartbeat and each signal it gets, with times.

usage: lost_policy_job.py LOGDIR [--on-term keep|ignore|exit:N] [--grandchild] [--finish]
                          [--exit N]

Writes LOGDIR/child.log (and LOGDIR/grandchild.log from a grandchild in the same
process group with --grandchild), one line per event: "start PID MONO",
"tick MONO WALL", "signal SIGNO MONO". MONO is CLOCK_MONOTONIC, the clock the
test reads too; WALL is the Unix time, to compare with a lock's value.
--on-term ignore ignores SIGTERM as `trap "" TERM` does (so it is not logged). SIGKILL cannot be logged: the heartbeat stopping (every 50 ms) shows
when the process died. With --finish the job ends when LOGDIR/finish appears,
exiting with --exit N; without it, it runs until a signal ends it.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

# Logged when they arrive, so a stray one shows in the log too.
LOGGED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1,
                  signal.SIGUSR2)
TICK = 0.05


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--on-term", default="keep")
    parser.add_argument("--grandchild", action="store_true")
    parser.add_argument("--finish", action="store_true")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--role", default="child")
    args = parser.parse_args()

    log_fd = os.open(os.path.join(args.logdir, args.role + ".log"),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def log(line):
        os.write(log_fd, (line + "\n").encode())  # O_APPEND: one whole line per write

    def on_signal(signo, _frame):
        log("signal %d %.6f" % (signo, time.monotonic()))
        if signo == signal.SIGTERM and args.on_term.startswith("exit:"):
            os._exit(int(args.on_term[len("exit:"):]))

    # Set every disposition explicitly: a test run under nohup or in the
    # background hands its children SIGHUP or SIGINT ignored, or signals blocked.
    for signo in LOGGED_SIGNALS:
        signal.signal(signo, on_signal)
    if args.on_term == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, LOGGED_SIGNALS)

    grandchild = None
    if args.grandchild:
        # Same process group (no setsid): the group's signals must reach it too.
        grandchild = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), args.logdir, "--role", "grandchild",
             "--on-term", args.on_term] + (["--finish"] if args.finish else []))
    log("start %d %.6f" % (os.getpid(), time.monotonic()))

    finish = os.path.join(args.logdir, "finish")
    while not (args.finish and os.path.exists(finish)):
        log("tick %.6f %.6f" % (time.monotonic(), time.time()))
        time.sleep(TICK)  # the job's tick: how often it logs
    if grandchild:
        grandchild.wait()
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
