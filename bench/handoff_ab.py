#!/usr/bin/env python3
"""Handoff under contention, two nxlock builds side by side (BENCHMARKS.md, measure 3).

usage: bench/handoff_ab.py --a NXLOCK_A --b NXLOCK_B --section SECTION [--rounds 3]
                           [--workers 6] [--sections 20] [--hold-ms 5] [--only file,redis]

bench/run's section 3 workload (`run-locked KEY section LOG 5`, bench/contention.py),
for the embedded store and Redis, build A and build B and flock(1), interleaved
round by round so that a burst of load elsewhere hits every column alike. Prints
the pooled handoff median and p95 per column, and each median over flock's.
Starts its own redis-server on a free loopback port and stops it (by pid).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True)
    parser.add_argument("--b", required=True)
    parser.add_argument("--section", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--sections", type=int, default=20)
    parser.add_argument("--hold-ms", default="5")
    parser.add_argument("--only", default="file,redis")
    args = parser.parse_args()
    backends = args.only.split(",")

    tmp = tempfile.mkdtemp(prefix="nxlock-handoff-ab-")
    redis = None
    try:
        port = free_port()
        if "redis" in backends:
            redis = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True,
                                 text=True).stdout.strip() != "PONG":
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not answer")
                time.sleep(0.05)
        handoffs = {}
        for round_ in range(1, args.rounds + 1):
            columns = []
            for build in ("A", "B"):
                nx = args.a if build == "A" else args.b
                if "file" in backends:
                    columns.append(("file " + build,
                                    [nx, "-u", "file://%s/store-%s-%d" % (tmp, build, round_),
                                     "run-locked", "k%d" % round_]))
                if "redis" in backends:
                    columns.append(("redis " + build, [nx, "-u", "redis://127.0.0.1:%d" % port,
                                                       "run-locked", "k%s%d" % (build, round_)]))
            columns.append(("flock", ["flock", "%s/flock-%d.lock" % (tmp, round_)]))
            # Alternate which build goes first from round to round.
            if round_ % 2 == 0:
                columns = columns[::-1]
            for name, command in columns:
                log = "%s/%s-%d.log" % (tmp, name.replace(" ", "-"), round_)
                out = log + ".json"
                subprocess.run(
                    [sys.executable, os.path.join(ROOT, "bench", "contention.py"), "--name", name,
                     "--workers", str(args.workers), "--sections", str(args.sections), "--log",
                     log, "--out", out, "--loop", "--", *command, args.section, log,
                     args.hold_ms], check=True, timeout=600)
                with open(out) as f:
                    result = json.load(f)
                ms = [h / 1e6 for h in result["handoffs_ns"]]
                handoffs.setdefault(name, []).extend(ms)
                print("round %d %-8s median %6.2f ms  p95 %6.2f ms  wall %.2f s" %
                      (round_, name, statistics.median(ms), p95(ms), result["wall_s"]), flush=True)
        flock = statistics.median(handoffs["flock"])
        print("\npooled over %d rounds (load average at end: %s)" %
              (args.rounds, open("/proc/loadavg").read().split()[0]))
        print("| column | handoff median ms | p95 ms | median / flock |")
        print("|---|---:|---:|---:|")
        for name in sorted(handoffs):
            ms = handoffs[name]
            print("| %s | %.2f | %.2f | %.2f |" % (name, statistics.median(ms), p95(ms),
                                                  statistics.median(ms) / flock))
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
