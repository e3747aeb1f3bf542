#!/usr/bin/env python3
"""Turns bench/run's raw results into the markdown table; prints it and writes it into BENCHMARKS.md.

usage: table.py RESULTS_DIR BENCHMARKS_MD [--no-write]

Reads hyperfine's --export-json files (every pass of a command is pooled, then
the median taken), the contention rounds (handoffs pooled over the rounds; wall
time is the median round) and the peak-RSS samples. Only the part of
BENCHMARKS.md between the two markers is replaced; the prose around it is kept.
"""
import glob
import json
import os
import statistics
import sys

BEGIN = "<!-- bench/run: generated table, begin -->"
END = "<!-- bench/run: generated table, end -->"


def load_times(results):
    """Command name -> every wall time (seconds) hyperfine measured for it."""
    times = {}
    for path in sorted(glob.glob(os.path.join(results, "hyperfine-*.json"))):
        with open(path) as f:
            for result in json.load(f)["results"]:
                times.setdefault(result["command"], []).extend(result["times"])
    return times


def load_contention(results):
    """Lock name -> {"walls": [s per round], "handoffs": [ns, pooled], "sections", "overlaps"}."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(results, "contention-*.json"))):
        with open(path) as f:
            data = json.load(f)
        run = runs.setdefault(data["name"], {"walls": [], "handoffs": [], "sections": 0,
                                             "overlaps": 0})
        run["walls"].append(data["wall_s"])
        run["handoffs"].extend(data["handoffs_ns"])
        run["sections"] += data["sections"]
        run["overlaps"] += data["overlaps"]
    return runs


def load_rss(results):
    """Command name -> peak RSS samples in KiB."""
    rss = {}
    for path in sorted(glob.glob(os.path.join(results, "rss-*.txt"))):
        name = os.path.basename(path)[len("rss-"):-len(".txt")]
        with open(path) as f:
            rss[name] = [int(line) for line in f if line.strip()]
    return rss


class DefaultNone(dict):
    """A dict whose missing keys read as None: rows of measures not taken are left out."""

    def __missing__(self, key):
        return None


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(seconds):
    return "%.2f ms" % (seconds * 1e3)


def build(results):
    times = load_times(results)
    contention = load_contention(results)
    rss = load_rss(results)
    med = {name: statistics.median(values) for name, values in times.items()}
    med = DefaultNone(med)
    hand = {name: statistics.median(run["handoffs"]) / 1e9 for name, run in contention.items()}
    hand95 = {name: p95(run["handoffs"]) / 1e9 for name, run in contention.items()}
    mem = {name: statistics.median(values) for name, values in rss.items()}

    rows = []

    def ratio_row(what, ours, base, fmt, goal=None):
        if ours is None or base is None:
            return  # not measured in this run (BENCH_ONLY)
        ratio = ours / base
        met = "—" if goal is None else ("yes" if ratio <= goal else "**no**")
        rows.append((what, fmt(ours), fmt(base), "%.2f" % ratio,
                     "—" if goal is None else "≤ %g" % goal, met))

    ratio_row("1. `setnx K V` per invocation, nxlock (Redis) vs redis-cli",
              med["nxlock setnx"], med["redis-cli setnx"], ms, 0.4)
    ratio_row("1. `get K` per invocation, nxlock (Redis) vs redis-cli",
              med["nxlock get"], med["redis-cli get"], ms)
    ratio_row("1. `setnx K V` per invocation over TLS (`rediss://`, verified) vs `redis-cli --tls`",
              med["nxlock setnx tls"], med["redis-cli --tls setnx"], ms, 0.5)
    ratio_row("1. `setnx K V` per invocation vs the floor (`bench/floor.c`: hiredis connect, "
              "one SETNX, print)", med["nxlock setnx, vs floor"], med["floor setnx"], ms, 1.15)
    ratio_row("1. `setnx K V` per invocation through Sentinel (`redis+sentinel://`) vs the "
              "direct URL", med["nxlock setnx sentinel"], med["nxlock setnx direct"], ms, 1.6)
    ratio_row("1. `setnx K V` per invocation on a cluster: a key on another node (MOVED) vs "
              "one on the seed", med["nxlock setnx cluster, other node"],
              med["nxlock setnx cluster, seed"], ms, 1.3)
    if "run-locked -n quorum of 3" in med:
        ratio_row("1. lock + release, `run-locked -n K true`: a quorum of 3 redis-servers "
                  "(`-u` ×3) vs one server", med["run-locked -n quorum of 3"],
                  med["run-locked -n one server"], ms, 1.5)
    ratio_row("2. uncontended guard `run-locked -n K true` (embedded) vs `flock -n FILE true`",
              med["nxlock run-locked -n"], med["flock -n"], ms)
    ratio_row("2. uncontended guard `run-locked -n K true` (embedded) vs the guard's floor "
              "(`bench/guard_floor.c`: a record lock, a pidfd watchdog, fork and exec)",
              med["nxlock run-locked -n, vs guard floor"], med["guard floor"], ms, 1.15)
    ratio_row("2. the guard's floor vs `flock -n FILE true`",
              med["guard floor, vs flock"], med["flock -n, vs guard floor"], ms)
    ratio_row("2. a peer: `run-locked -n K true` on Redis vs `etcdctl lock K true` (etcd on "
              "loopback)", med["nxlock run-locked -n Redis, vs etcd"], med["etcdctl lock"], ms, 0.12)
    ratio_row("2. the same lock on the same etcd: `-u etcd://… run-locked -n K true` vs "
              "`etcdctl lock K true`", med["nxlock run-locked -n etcd, vs etcdctl"],
              med["etcdctl lock, vs nxlock on etcd"], ms, 0.25)
    ratio_row("2. the metrics file: `run-locked -n --metrics-dir DIR K true` vs without "
              "(embedded)", med["run-locked -n --metrics-dir"], med["run-locked -n, no metrics"],
              ms)
    for name, label in (("nxlock-file", "embedded"), ("nxlock-redis", "Redis")):
        if name not in contention:
            continue
        ratio_row("3. contention: handoff median, nxlock %s vs flock(1)" % label,
                  hand[name], hand["flock"], ms, 1.1)
        ratio_row("3. contention: handoff p95, nxlock %s vs flock(1)" % label,
                  hand95[name], hand95["flock"], ms)
        ratio_row("3. contention: total wall, nxlock %s vs flock(1)" % label,
                  statistics.median(contention[name]["walls"]),
                  statistics.median(contention["flock"]["walls"]), lambda s: "%.2f s" % s)
    ratio_row("3. contention: handoff median, nxlock Redis vs SETNX-page shell client",
              hand.get("nxlock-redis"), hand.get("setnx-page-sh"), ms)
    ratio_row("4. store scale: `get K`, 20,000 keys vs 1 key",
              med["get, 20k keys"], med["get, 1 key"], ms, 1.5)
    ratio_row("4. store scale: `run-locked -n K true`, 20,000 keys vs 1 key",
              med["run-locked -n, 20k keys"], med["run-locked -n, 1 key"], ms, 1.5)
    # What this turn's features (tokens that never go back, the eviction check,
    # expiring side keys; slots, shared locks, list, metrics) cost, against
    # BENCH_BASE: the goals stay those of rows 1 and 2.
    for what, name in (("`setnx K V` (Redis)", "setnx"),
                       ("`run-locked -n K true` (Redis)", "run-locked -n Redis"),
                       ("`run-locked -n K true` (embedded)", "run-locked -n embedded")):
        ratio_row("8. this build vs the one before this turn's features: %s" % what,
                  med[name + " after"], med[name + " before"], ms)
    for name, label in (("nxlock-file", "embedded"), ("nxlock-redis", "Redis"),
                        ("nxlock-tls", "TLS, `rediss://`"), ("nxlock-sentinel", "Sentinel"),
                        ("nxlock-cluster", "Cluster, key on another node"),
                        ("nxlock-quorum", "a quorum of 3 redis-servers")):
        if name not in mem:
            continue
        ours, base = mem[name], mem["flock"]
        met = "yes" if ours <= 4 * 1024 else "**no**"
        rows.append(("5. peak RSS `run-locked K sleep 1` (%s) vs `flock FILE sleep 1`" % label,
                     "%.2f MiB" % (ours / 1024), "%.2f MiB" % (base / 1024),
                     "%.2f" % (ours / base), "≤ 4 MiB (nxlock's own peak)", met))

    lines = ["| measure | nxlock | baseline | ratio | goal | met |",
             "|---|---:|---:|---:|---|---|"]
    lines += ["| %s |" % " | ".join(row) for row in rows]
    # bench/waiters writes its rows (goals 4 and 5: many waiters, fairness) in
    # the same columns: they join the table as they are.
    waiters = os.path.join(results, "waiters.md")
    if os.path.exists(waiters):
        with open(waiters) as f:
            lines += [line.rstrip("\n") for line in f
                      if line.startswith(("| 6. waiters", "| 7. fairness"))]

    detail = ["| lock | total wall (median round) | handoff median | handoff p95 | handoff max "
              "| sections | overlaps |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    labels = {"nxlock-file": "`nxlock run-locked`, embedded store",
              "nxlock-redis": "`nxlock run-locked`, Redis",
              "flock": "`flock FILE`",
              "setnx-page-sh": "SETNX page in sh + redis-cli, 0.1 s poll"}
    if not contention:
        detail = []  # not measured in this run (BENCH_ONLY)
    for name in ("nxlock-file", "nxlock-redis", "flock", "setnx-page-sh"):
        if name not in contention:
            continue
        run = contention[name]
        detail.append("| %s | %.2f s | %s | %s | %s | %d | %d |" % (
            labels[name], statistics.median(run["walls"]), ms(hand[name]), ms(hand95[name]),
            ms(max(run["handoffs"]) / 1e9), run["sections"], run["overlaps"]))
    return "\n".join(lines), "\n".join(detail)


def read_machine(results):
    with open(os.path.join(results, "machine.txt")) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def main():
    results, markdown = sys.argv[1], sys.argv[2]
    table, detail = build(results)
    machine = read_machine(results)
    print(table)
    if detail:
        print()
        print(detail)
    if "--no-write" in sys.argv:
        print("\n(not written to %s: a smoke run below the benchmark's minimum counts)" % markdown)
        return 0

    generated = "\n".join([
        BEGIN,
        "",
        "Machine and run:",
        "",
        *["- " + line for line in machine],
        "",
        table,
        "",
        "Contention, every lock (6 workers × 20 sections of 5 ms, handoffs pooled over the rounds):",
        "",
        detail,
        "",
        END,
    ])
    text = ""
    if os.path.exists(markdown):
        with open(markdown) as f:
            text = f.read()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + generated + tail
    else:
        text = ("# nxlock benchmarks\n\nRerun with `bench/run`.\n\n" + generated + "\n")
    with open(markdown, "w") as f:
        f.write(text)
    print("\nwritten to %s" % markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
