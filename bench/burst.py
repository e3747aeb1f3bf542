#!/usr/bin/env python3
"""A fleet's burst: one crontab tick of thousands of hosts at one Redis, and thousands of waiters.

usage: bench/burst.py [--nxlock BIN] [--section BIN] [--sizes 500,1000,2000]
                      [--waiters 100,500,2000] [--hold-ms 5] [--tuned auto|always|never]
                      [--tuned-backlog N] [--tuned-maxclients N] [--timeout S]
                      [--skip burst,waiters] [--json FILE|-] [--from-json FILE]

1. The burst. For each N of --sizes, N launchers are forked first; each blocks
   on reading one shared pipe, whose write end only this script holds. Closing
   it is the barrier's release: every launcher then execs
   `nxlock -u redis://127.0.0.1:PORT run-locked -n KEY sh -c 'echo ran >>LOG; cat FIFO'`
   at once. The job holds the lock until every other process has exited (it
   reads a FIFO this script closes then), so each of them must find it held.
   Checked: the job ran exactly once, the others exited 75 (a histogram of
   every exit status, and the stderr of any unexpected one, collected per
   process). Measured: latency per process from the release to its reaping
   (monotonic clock, os.wait4), the processes' own CPU (rusage), the server's
   CPU (INFO used_cpu_sys + used_cpu_user), connections and commands per process
   (INFO stats, commandstats), the most clients connected at once (INFO clients
   sampled every 20 ms), rejected connections, and the host's ListenOverflows
   / ListenDrops (/proc/net/netstat, this network namespace, so anything else
   listening on it counts too). First against the server's defaults
   (tcp-backlog 511); with --tuned auto, again against a server with
   --tcp-backlog raised to somaxconn and --maxclients as needed, if the
   defaults showed an unexpected status, a rejected connection or a listen
   overflow.
2. Waiters. One holder takes the lock; N waiters of
   `nxlock -u URL run-locked -w 600 KEY section LOG.i HOLD_MS` (build/bench/section,
   or bench/section.c compiled into the temp dir) start one after
   another, each only once the previous one is in the queue
   (ZCARD {KEY}:queue:KEY); then the holder lets go. Checked: all N ran, never
   two at once (bench/section's CLOCK_REALTIME enter/exit lines), granted in
   arrival order. Measured: Redis commands per critical section (commandstats
   calls, script-internal ones included, and total_commands_processed; this
   script's own INFO and ZCARD calls are taken out), over the whole run and over
   the handoffs alone, handoff median and p99, the wall times, and Redis CPU.

Prints markdown tables and an extrapolation to 10,000 hosts; --json writes the
raw results, --from-json prints the tables of such a file again. Runs a private
copy of --nxlock (its sha256 is in the JSON), so a rebuild of build/bench
during the run changes nothing. Starts its own redis-server on a free loopback
port per server configuration, stops it by its pid, and kills the process
group of any straggler it started; removes its temp dir. Takes about a minute
with the defaults on 2 CPUs.
"""
import argparse
import ctypes
import hashlib
import json
import math
import re
import os
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
BUSY = 75
HOSTS = 10000
JOB = 'echo ran >>"$0"; exec cat "$1" >/dev/null'


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def listen_counters():
    """TcpExt ListenOverflows and ListenDrops of this network namespace."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], map(int, values.split()[1:])))
            return {k: table.get(k, 0) for k in ("ListenOverflows", "ListenDrops")}
    return {"ListenOverflows": 0, "ListenDrops": 0}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    os.setpgid(0, 0)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Conn:
    """A minimal RESP client on one connection."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = self.sock.makefile("rb")

    def call(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(parts))
        return self._reply()

    def _reply(self):
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("redis-server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self.reader.read(size + 2)[:-2].decode()
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self._reply() for _ in range(size)]
        raise RuntimeError("redis: unexpected reply %r" % line)

    def info(self, section="everything"):
        fields = {}
        for line in self.call("INFO", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                fields[k] = v
        return fields

    def close(self):
        self.reader.close()
        self.sock.close()


def snapshot(conn):
    """What a run is measured by: server CPU, connections, commands (per command), at one time."""
    fields = conn.info()
    calls = {}
    for k, v in fields.items():
        if k.startswith("cmdstat_"):
            calls[k[len("cmdstat_"):]] = int(v.split("calls=")[1].split(",")[0])
    snap = {"cpu": float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"]),
            "connections": int(fields["total_connections_received"]),
            "rejected": int(fields["rejected_connections"]),
            "processed": int(fields["total_commands_processed"]),
            "calls": calls, "mono": time.monotonic()}
    snap.update(listen_counters())
    return snap


def delta(before, after, own=None):
    """after - before; the script's own commands (INFO always, `own` calls by name) taken out."""
    own = dict(own or {})
    calls = {}
    for name, n in after["calls"].items():
        d = n - before["calls"].get(name, 0)
        if name == "info":
            own["info"] = d
            continue
        d -= own.get(name, 0)
        if d:
            calls[name] = d
    return {"server_cpu_s": after["cpu"] - before["cpu"],
            "connections": after["connections"] - before["connections"],
            "rejected": after["rejected"] - before["rejected"],
            "processed": after["processed"] - before["processed"] - sum(own.values()),
            "commandstats": sum(calls.values()), "calls": calls,
            "scripts": sum(n for name, n in calls.items()
                           if name.startswith(("eval", "fcall"))),
            "listen_overflows": after["ListenOverflows"] - before["ListenOverflows"],
            "listen_drops": after["ListenDrops"] - before["ListenDrops"],
            "seconds": after["mono"] - before["mono"]}


class Sampler(threading.Thread):
    """The most clients connected at once, from INFO clients every 20 ms on its own connection."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.conn = Conn(port)
        self.stop = threading.Event()
        self.peak = 0
        self.samples = 0

    def run(self):
        while not self.stop.is_set():
            try:
                n = int(self.conn.info("clients")["connected_clients"])
            except (OSError, RuntimeError, ConnectionError):
                break
            self.peak = max(self.peak, n)
            self.samples += 1
            self.stop.wait(0.02)

    def finish(self):
        self.stop.set()
        self.join(timeout=10)
        self.conn.close()
        # The control connection and the sampler's own are not the workload's.
        return max(0, self.peak - 2)


class Redis:
    def __init__(self, tmp, label, extra):
        self.label = label
        self.extra = extra
        self.dir = tempfile.mkdtemp(dir=tmp, prefix="redis-%s-" % label)
        self.port = free_port()
        self.url = "redis://127.0.0.1:%d" % self.port
        self.log = os.path.join(self.dir, "redis.log")
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir,
             "--logfile", self.log, *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.conn = Conn(self.port)
                if self.conn.call("PING") == "PONG":
                    break
            except (OSError, ConnectionError):
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("redis-server did not answer on port %d" % self.port)
            time.sleep(0.05)
        config = self.conn.call("CONFIG", "GET", "*")
        config = dict(zip(config[::2], config[1::2]))
        self.backlog = int(config["tcp-backlog"])
        self.maxclients = int(config["maxclients"])
        self.version = self.conn.info("server")["redis_version"]

    def warnings(self):
        try:
            with open(self.log, errors="replace") as f:
                return [line.strip() for line in f if "# WARNING" in line or "# Warning" in line
                        or "maxclients" in line.lower()]
        except OSError:
            return []

    def stop(self):
        if getattr(self, "conn", None):
            try:
                self.conn.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]  # nearest rank


def launcher(argv, gate_r, gate_w, ready_r, ready_w, leader, err_path):
    """In a forked child: join the group, say ready, block on the gate, exec nxlock."""
    try:
        os.setpgid(0, leader)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM,
                    signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.close(gate_w)
        os.close(ready_r)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        os.write(ready_w, b".")
        os.close(ready_w)
        os.read(gate_r, 1)  # EOF when the parent closes the write end: the release
        os.execv(argv[0], argv)
    except BaseException as e:
        try:
            os.write(2, ("burst.py: launcher: %r\n" % e).encode())
        except OSError:
            pass
    os._exit(127)


def count_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def burst(nx, srv, n, tmp, limit):
    """One burst of n `run-locked -n` behind a barrier; returns its figures."""
    work = tempfile.mkdtemp(dir=tmp, prefix="burst-%s-%d-" % (srv.label, n))
    key = "burst-%s-%d-%d" % (srv.label, n, time.monotonic_ns())
    ran_log = os.path.join(work, "ran.log")
    fifo = os.path.join(work, "job.fifo")
    os.mkfifo(fifo)
    hold = os.open(fifo, os.O_RDWR)  # the job's `cat` ends when this closes
    argv = [nx, "-u", srv.url, "run-locked", "-n", key, "/bin/sh", "-c", JOB, ran_log, fifo]
    gate_r, gate_w = os.pipe()
    ready_r, ready_w = os.pipe()
    kids = {}
    leader = 0
    sampler = None
    done = {}
    old_chld = None
    wake_r = wake_w = -1
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for i in range(n):
            pid = os.fork()
            if pid == 0:
                launcher(argv, gate_r, gate_w, ready_r, ready_w, leader,
                         os.path.join(work, "%d.err" % i))
            try:
                os.setpgid(pid, leader or pid)
            except OSError:
                pass  # the child did it first
            leader = leader or pid
            kids[pid] = i
        os.close(ready_w)
        ready_w = -1
        got = 0
        deadline = time.monotonic() + 60
        while got < n and time.monotonic() < deadline:
            if select.select([ready_r], [], [], 1.0)[0]:
                chunk = os.read(ready_r, 65536)
                if not chunk:
                    break
                got += len(chunk)
        if got < n:
            raise RuntimeError("burst %d: only %d launchers became ready" % (n, got))
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old_chld = signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        sampler = Sampler(srv.port)
        sampler.start()
        time.sleep(0.1)
        before = snapshot(srv.conn)
        released = time.monotonic_ns()
        os.close(gate_w)  # the barrier's release
        gate_w = -1
        deadline = time.monotonic() + limit
        while kids:
            while kids:
                pid, status, usage = os.wait4(-leader, os.WNOHANG)
                if pid == 0:
                    break
                at = time.monotonic_ns()
                i = kids.pop(pid, None)
                if i is not None:
                    done[i] = (os.waitstatus_to_exitcode(status), (at - released) / 1e6,
                               usage.ru_utime + usage.ru_stime)
            # Once only the job's holders are left, let the job end.
            if hold >= 0 and len(kids) <= 4 and len(kids) <= count_lines(ran_log):
                os.close(hold)
                hold = -1
            if not kids or time.monotonic() > deadline:
                break
            select.select([wake_r], [], [], 0.5)
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
        stragglers = sorted(kids.values())
        if kids:
            os.killpg(leader, signal.SIGKILL)
        after = snapshot(srv.conn)
        peak = sampler.finish()
        sampler = None
    finally:
        if sampler:
            sampler.finish()
        if old_chld is not None:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, old_chld)
        for fd in (hold, gate_r, gate_w, ready_r, ready_w, wake_r, wake_w):
            if fd >= 0:
                os.close(fd)
        if kids:
            try:
                os.killpg(leader, signal.SIGKILL)
            except ProcessLookupError:
                pass
            give_up = time.monotonic() + 30
            while kids and time.monotonic() < give_up:
                pid, _ = os.waitpid(-leader, os.WNOHANG)
                if pid:
                    kids.pop(pid, None)
                else:
                    time.sleep(0.01)
    statuses = {}
    for status, _, _ in done.values():
        statuses[status] = statuses.get(status, 0) + 1
    ran = count_lines(ran_log)
    winners = [i for i, (s, _, _) in done.items() if s == 0]
    losers = [ms for s, ms, _ in done.values() if s == BUSY]
    everyone = [ms for i, (_, ms, _) in done.items() if i not in winners]
    unexpected = {}
    for i, (status, _, _) in sorted(done.items()):
        if status in (0, BUSY):
            continue
        try:
            with open(os.path.join(work, "%d.err" % i), errors="replace") as f:
                for line in f:
                    # Strip what differs from process to process (pids, times).
                    text = re.sub(r"\d+", "#", line.strip().replace(srv.url, "URL"))
                    bucket = unexpected.setdefault(str(status), {})
                    bucket[text] = bucket.get(text, 0) + 1
        except FileNotFoundError:
            pass
    examples = {}
    for i, (status, _, _) in sorted(done.items()):
        if status not in (0, BUSY) and str(status) not in examples:
            with open(os.path.join(work, "%d.err" % i), errors="replace") as f:
                examples[str(status)] = f.read()[-2000:]
    d = delta(before, after)
    result = {
        "n": n, "server": srv.label, "tcp_backlog": srv.backlog, "maxclients": srv.maxclients,
        "ran": ran, "winners": len(winners), "statuses": {str(k): v for k, v in statuses.items()},
        "stragglers": stragglers, "unexpected_stderr": unexpected, "stderr_examples": examples,
        "latency_ms": {"p50": percentile(everyone, 50), "p99": percentile(everyone, 99),
                       "max": max(everyone) if everyone else None,
                       "busy_p50": percentile(losers, 50), "busy_max": max(losers or [0])},
        "winner_ms": [done[i][1] for i in winners],
        "client_cpu_ms_per_process":
            1000.0 * sum(c for _, _, c in done.values()) / max(1, len(done)),
        "peak_clients": peak,
        "ok": ran == 1 and statuses.get(BUSY, 0) == n - 1 and not stragglers,
    }
    result.update(d)
    shutil.rmtree(work, ignore_errors=True)
    return result


def parse_sections(work, n):
    """(index, enter_ns, exit_ns) of every section found, and how many lines were malformed."""
    found, bad = [], 0
    for i in range(n):
        enter = exit_ = None
        try:
            with open(os.path.join(work, "s-%d" % i)) as f:
                for line in f:
                    what, ns, _ = line.split()
                    if what == "enter" and enter is None:
                        enter = int(ns)
                    elif what == "exit" and exit_ is None:
                        exit_ = int(ns)
                    else:
                        bad += 1
        except FileNotFoundError:
            continue
        if enter is not None and exit_ is not None:
            found.append((i, enter, exit_))
        else:
            bad += 1
    return found, bad


def waiters(nx, section, srv, n, tmp, hold_ms, limit):
    """One holder, n queued waiters in a known order, then the release; returns the figures."""
    work = tempfile.mkdtemp(dir=tmp, prefix="waiters-%d-" % n)
    key = "waiters-%d-%d" % (n, time.monotonic_ns())
    queue = "{%s}:queue:%s" % (key, key)
    fifo = os.path.join(work, "holder.fifo")
    os.mkfifo(fifo)
    hold = os.open(fifo, os.O_RDWR)
    held = os.path.join(work, "held")
    err_path = os.path.join(work, "stderr")
    procs = []
    holder = None
    polls = 0
    sampler = None
    try:
        with open(err_path, "ab") as err:
            holder = subprocess.Popen(
                [nx, "-u", srv.url, "run-locked", key, "/bin/sh", "-c",
                 'touch "$0"; exec cat "$1" >/dev/null', held, fifo],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                preexec_fn=die_with_parent)
            deadline = time.monotonic() + 30
            while not os.path.exists(held):
                if time.monotonic() > deadline or holder.poll() is not None:
                    raise RuntimeError("waiters %d: the first holder did not take the lock" % n)
                time.sleep(0.01)
            sampler = Sampler(srv.port)
            sampler.start()
            s0 = snapshot(srv.conn)
            join_deadline = time.monotonic() + limit
            for i in range(n):
                procs.append(subprocess.Popen(
                    [nx, "-u", srv.url, "run-locked", "-w", "600", key, section,
                     os.path.join(work, "s-%d" % i), str(hold_ms)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    preexec_fn=die_with_parent))
                deadline = min(join_deadline, time.monotonic() + 60)
                while True:
                    queued = srv.conn.call("ZCARD", queue)
                    polls += 1
                    if queued >= i + 1:
                        break
                    if procs[-1].poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            "waiters %d: waiter %d (exit %s) did not join the queue; ZCARD %s = %d"
                            % (n, i, procs[-1].returncode, queue, queued))
                    time.sleep(0.001)
            s1 = snapshot(srv.conn)
            released = time.time_ns()
            os.close(hold)  # the holder's job ends, it releases: the handoffs begin
            hold = -1
            deadline = time.monotonic() + limit
            for p in [holder] + procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            s2 = snapshot(srv.conn)
            peak = sampler.finish()
            sampler = None
    finally:
        if sampler:
            sampler.finish()
        if hold >= 0:
            os.close(hold)
        for p in ([holder] if holder else []) + procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=30)
    statuses = {}
    for p in procs:
        statuses[str(p.returncode)] = statuses.get(str(p.returncode), 0) + 1
    with open(err_path, errors="replace") as f:
        stderr_lines = f.read().splitlines()
    sections, malformed = parse_sections(work, n)
    sections.sort(key=lambda s: s[1])
    overlaps = 0
    latest_exit = None
    for _, enter, exit_ in sections:
        if latest_exit is not None and enter < latest_exit:
            overlaps += 1
        latest_exit = exit_ if latest_exit is None else max(latest_exit, exit_)
    waiting = sorted(i for i, _, _ in sections)
    out_of_order = 0
    pending = set(range(n))
    for i, _, _ in sections:
        if i != min(pending):
            out_of_order += 1
        pending.discard(i)
    handoffs = [(b[1] - a[2]) / 1e6 for a, b in zip(sections, sections[1:])]
    whole = delta(s0, s2, {"zcard": polls})
    handoff_phase = delta(s1, s2)
    join = delta(s0, s1, {"zcard": polls})
    result = {
        "n": n, "maxclients": srv.maxclients, "ran": len(sections),
        "lost": n - len(set(waiting)), "malformed": malformed,
        "overlaps": overlaps, "out_of_order": out_of_order, "statuses": statuses,
        "holder_status": holder.returncode if holder else None,
        "stderr_lines": stderr_lines[:50], "stderr_line_count": len(stderr_lines),
        "handoff_ms": {"median": statistics.median(handoffs) if handoffs else None,
                       "p99": percentile(handoffs, 99), "max": max(handoffs or [0])},
        "join_s": join["seconds"],
        "handoff_phase_s": ((sections[-1][2] - released) / 1e9) if sections else None,
        "first_grant_ms": ((sections[0][1] - released) / 1e6) if sections else None,
        "per_section": {"commandstats": whole["commandstats"] / n,
                        "processed": whole["processed"] / n, "scripts": whole["scripts"] / n,
                        "handoff_commandstats": handoff_phase["commandstats"] / n,
                        "handoff_processed": handoff_phase["processed"] / n,
                        "join_commandstats": join["commandstats"] / n,
                        "connections": whole["connections"] / n},
        "whole": whole, "join": join, "handoff": handoff_phase, "peak_clients": peak,
        "polls": polls,
    }
    result["ok"] = (result["lost"] == 0 and not overlaps and not out_of_order
                    and statuses == {"0": n} and not malformed)
    shutil.rmtree(work, ignore_errors=True)
    return result


def fit(xs, ys):
    """Least-squares line through (xs, ys): (slope, intercept)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def fmt(v, spec="%.1f"):
    return "—" if v is None else spec % v


def statuses_text(statuses):
    ordered = sorted(statuses.items(), key=lambda kv: int(kv[0]))
    return " ".join("%s×%d" % (k, v) for k, v in ordered)


def burst_table(rows):
    out = ["| N | server | job ran | exit statuses | p50 ms | p99 ms | max ms | "
           "Redis CPU ms (µs/proc) | client CPU ms/proc | connections/proc | "
           "peak clients (20 ms) | rejected | listen overflows / drops | "
           "commands/proc (scripts) | ok |",
           "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append("| %d | %s | %d | %s | %s | %s | %s | %.0f (%.0f) | %.2f | %.2f | %d | %d | "
                   "%d / %d | %.1f (%.1f) | %s |" % (
                       r["n"], "%s (backlog %d, maxclients %d)" % (r["server"], r["tcp_backlog"],
                                                                   r["maxclients"]),
                       r["ran"], statuses_text(r["statuses"]), fmt(r["latency_ms"]["p50"]),
                       fmt(r["latency_ms"]["p99"]), fmt(r["latency_ms"]["max"]),
                       r["server_cpu_s"] * 1000, r["server_cpu_s"] * 1e6 / r["n"],
                       r["client_cpu_ms_per_process"], r["connections"] / r["n"],
                       r["peak_clients"], r["rejected"], r["listen_overflows"],
                       r["listen_drops"], r["commandstats"] / r["n"], r["scripts"] / r["n"],
                       "yes" if r["ok"] else "**no**"))
    return out


def waiters_table(rows):
    out = ["| waiters N | ran / lost | overlaps | out of order | exit statuses | "
           "commands/section: commandstats (processed) | handoff phase only | join phase | "
           "script calls/section | connections/waiter | handoff median / p99 ms | join s | "
           "handoffs s | Redis CPU s (join / handoffs) | peak clients (20 ms) | ok |",
           "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ps = r["per_section"]
        out.append("| %d | %d / %d | %d | %d | %s | %.1f (%.1f) | %.1f | %.1f | %.1f | %.2f | "
                   "%s / %s | %.1f | %s | %.2f / %.2f | %d | %s |" % (
                       r["n"], r["ran"], r["lost"], r["overlaps"], r["out_of_order"],
                       statuses_text(r["statuses"]), ps["commandstats"], ps["processed"],
                       ps["handoff_commandstats"], ps["join_commandstats"], ps["scripts"],
                       ps["connections"],
                       fmt(r["handoff_ms"]["median"], "%.2f"), fmt(r["handoff_ms"]["p99"], "%.2f"),
                       r["join_s"], fmt(r["handoff_phase_s"]), r["join"]["server_cpu_s"],
                       r["handoff"]["server_cpu_s"], r["peak_clients"],
                       "yes" if r["ok"] else "**no**"))
    return out


def at_hosts(rows, value):
    """A least-squares line through value(row) against N, evaluated at HOSTS."""
    slope, icept = fit([r["n"] for r in rows], [value(r) for r in rows])
    return slope * HOSTS + icept


def extrapolation(bursts, waiter_rows, somaxconn, syn_backlog, cpus):
    """The paragraphs for BENCHMARKS.md, computed from the measured sizes."""
    text = []
    by_server = {}
    for r in bursts:
        by_server.setdefault(r["server"], []).append(r)
    for rows in by_server.values():
        rows.sort(key=lambda r: r["n"])
    final = by_server.get("tuned") or by_server.get("default")
    if final and len(final) >= 2:
        sizes = ", ".join(str(r["n"]) for r in final)
        # Per process, not a fit: a few ms of noise from other work on the machine tilts a
        # line through three points more than it moves the per-process figures.
        cpu_us = [r["server_cpu_s"] * 1e6 / r["n"] for r in final]
        low, high = min(cpu_us) * HOSTS / 1e6, max(cpu_us) * HOSTS / 1e6
        commands = statistics.fmean(r["commandstats"] / r["n"] for r in final)
        scripts = statistics.fmean(r["scripts"] / r["n"] for r in final)
        conns = statistics.fmean(r["connections"] / r["n"] for r in final)
        client = statistics.fmean(r["client_cpu_ms_per_process"] for r in final)
        peak = max(r["peak_clients"] / r["n"] for r in final)
        maxclients = final[0]["maxclients"]
        bad = sum(v for r in bursts for k, v in r["statuses"].items() if k not in ("0", str(BUSY)))
        text.append(
            "**Burst, server side.** At N = %s, each `run-locked -n` that finds the lock held "
            "costs the server %.1f commands (%.1f script call%s, the rest inside it), %.2f "
            "connection%s and %s µs of CPU: no growth with N. %d hosts would cost the "
            "single-threaded server %.1f–%.1f s of CPU, a ceiling of %.0f–%.0f hosts/s: in a "
            "burst where they all arrive at once the last answer comes that long after the "
            "tick and the median half as long, however fast the hosts themselves are."
            % (sizes, commands, scripts, "" if round(scripts, 1) == 1 else "s", conns,
               "" if round(conns, 2) == 1 else "s",
               "/".join("%.0f" % c for c in cpu_us), HOSTS, low, high, HOSTS / high,
               HOSTS / low))
        text.append(
            "**Burst, latency here.** On this %d-CPU loopback the %d processes share the CPUs "
            "with the server (%.1f ms of CPU each, exec included), so they progress together "
            "and finish together: p50 %s ms, max %s ms at N = %s. Extended linearly to %d "
            "that is p50 %.0f ms, max %.0f ms, a bound for one machine launching them all, not "
            "for a fleet where each host has its own CPU. %s"
            % (cpus, final[-1]["n"], client,
               "/".join(fmt(r["latency_ms"]["p50"], "%.0f") for r in final),
               "/".join(fmt(r["latency_ms"]["max"], "%.0f") for r in final), sizes, HOSTS,
               at_hosts(final, lambda r: r["latency_ms"]["p50"] or 0),
               at_hosts(final, lambda r: r["latency_ms"]["max"] or 0),
               ("Exit statuses: one 0 and N - 1 × 75 at every size and server."
                if not bad else "**%d process%s exited with an unexpected status (see "
                "below).**" % (bad, "" if bad == 1 else "es"))))
        limits = []
        default = by_server.get("default", [])
        overflowed = [r for r in default if r["listen_overflows"]]
        if overflowed:
            tuned = {t["n"]: t for t in by_server.get("tuned", [])}
            unavailable = sum(r["statuses"].get("69", 0) for r in overflowed)

            def p50_p99(r):
                return "%s/%s" % (fmt(r["latency_ms"]["p50"], "%.0f"),
                                  fmt(r["latency_ms"]["p99"], "%.0f"))

            limits.append(
                "The default accept queue (tcp-backlog %d) overflowed at N = %s (%s "
                "ListenOverflows): a client whose SYN was dropped connects on a later "
                "attempt (nxlock starts another every 0.25 s while one is pending; the "
                "kernel's own retransmits come 1 s and 3 s later) (p50/p99 %s ms, against "
                "%s ms with %s, which dropped %s), %s"
                % (default[0]["tcp_backlog"], ", ".join(str(r["n"]) for r in overflowed),
                   ", ".join(str(r["listen_overflows"]) for r in overflowed),
                   ", ".join(p50_p99(r) for r in overflowed),
                   ", ".join(p50_p99(tuned[r["n"]]) for r in overflowed if r["n"] in tuned)
                   or "—",
                   ("the tuned server's accept queue of %d"
                    % min(final[0]["tcp_backlog"], somaxconn)) if tuned else "no tuned server",
                   "/".join(str(tuned[r["n"]]["listen_overflows"]) for r in overflowed
                            if r["n"] in tuned) or "—",
                   ("and %d process%s exited 69 (their connects timed out: see stderr)."
                    % (unavailable, "" if unavailable == 1 else "es"))
                   if unavailable else "and none exited 69 within nxlock's 2 s `--io-timeout`."))
        else:
            limits.append("No accept-queue overflow at any size with tcp-backlog %d."
                          % (default or final)[0]["tcp_backlog"])
        limits.append(
            "%d hosts arriving within the server's %.1f s would be %.1f× the accept "
            "queue somaxconn allows (%d; SYN backlog %d), so raise net.core.somaxconn and "
            "tcp-backlog to the fleet's size or spread the tick (cron's start delay, "
            "`--hold`). Here nearly every process was connected at the same moment (peak "
            "%.2f connected clients per process, sampled every 20 ms): %d hosts would need "
            "about %d connections against maxclients %d, %s, and the server's RLIMIT_NOFILE "
            "must allow maxclients + 32."
            % (HOSTS, high, HOSTS / float(somaxconn or 1), somaxconn, syn_backlog, peak,
               HOSTS, round(peak * HOSTS), maxclients,
               "with no room for any other client (rejected: exit 69)"
               if peak * HOSTS >= maxclients * 0.95 else "within it"))
        text.append("**Burst, limits.** " + " ".join(limits))
    if waiter_rows:
        rows = sorted(waiter_rows, key=lambda r: r["n"])
        ns = ", ".join(str(r["n"]) for r in rows)

        def series(value):
            return "/".join("%.1f" % value(r) for r in rows)

        def cpu_share(r):
            return r["handoff"]["server_cpu_s"] / max(1e-9, r["handoff"]["seconds"])

        per_call = statistics.fmean(1e6 * r["handoff"]["server_cpu_s"]
                                    / max(1, r["handoff"]["scripts"]) for r in rows)
        conns = round(max(r["peak_clients"] / r["n"] for r in rows), 2)
        bad = [r["n"] for r in rows if not r["ok"]]
        per_section = [r["per_section"]["commandstats"] for r in rows]
        grows = per_section[-1] > 1.25 * per_section[0]
        share_10k = 100 * at_hosts(rows, cpu_share) if len(rows) >= 2 else None
        text.append(
            "**Waiters.** At %s waiters: %s; handoff median %s ms. Redis commands per "
            "critical section: %s (commandstats, script-internal calls included; %s script "
            "calls), %s%s The server's CPU during the handoffs was %s of one CPU (about %.0f "
            "µs per script call)%s. Each waiter holds %.0f connections (its own and its "
            "wake-up subscription), so %d waiters need %d clients, %s maxclients %d."
            % (ns, ("all ran, none lost, never two at once, all in arrival order"
                    if not bad else "**failed checks at N = %s**" % bad),
               series(lambda r: r["handoff_ms"]["median"] or 0),
               series(lambda r: r["per_section"]["commandstats"]),
               series(lambda r: r["per_section"]["scripts"]),
               "**not flat**: every queued waiter behind the first looks again every "
               "250–400 ms to renew its place, so the calls per section grow with the time "
               "spent queued, i.e. with N." if grows else "flat as N grows.",
               (" The fit gives %.0f per section at %d waiters."
                % (at_hosts(rows, lambda r: r["per_section"]["commandstats"]), HOSTS))
               if len(rows) >= 2 else "",
               "/".join("%.0f %%" % (100 * cpu_share(r)) for r in rows), per_call,
               ("; a line through those reaches about %.0f %% at %d waiters on one key%s"
                % (share_10k, HOSTS, ", more than the single-threaded server has"
                   if share_10k > 100 else "")) if share_10k is not None else "",
               conns, HOSTS, round(conns * HOSTS),
               "beyond the default" if conns * HOSTS > rows[0]["maxclients"] else "within",
               rows[0]["maxclients"]))
    return "\n\n".join(text)


def report(results):
    """The markdown tables and the extrapolation, from the raw results."""
    machine = results["machine"]
    somaxconn, syn_backlog, cpus = (machine["somaxconn"], machine["tcp_max_syn_backlog"],
                                    machine["cpus"])
    results["extrapolation"] = extrapolation(results["bursts"], results["waiters"],
                                             somaxconn or 0, syn_backlog or 0, cpus)
    out = []
    if results["bursts"]:
        out.append("### Burst: N × `run-locked -n` released at once (somaxconn %s, "
                   "tcp_max_syn_backlog %s, %s CPUs)" % (somaxconn, syn_backlog, cpus))
        out.append("")
        out += burst_table(results["bursts"])
        out.append("")
        if "tuned" in results:
            because = results["tuned"]["because_of_sizes"]
            out.append("Tuned server (%s): `--tcp-backlog %d --maxclients %d`."
                       % ("needed at N = %s" % ",".join(map(str, because))
                          if because else "run with --tuned always",
                          results["tuned"]["tcp_backlog"], results["tuned"]["maxclients"]))
        else:
            out.append("No tuning needed: the defaults showed no unexpected status, rejected "
                       "connection or listen overflow.")
        out.append("")
        for r in results["bursts"]:
            for status, lines in r["unexpected_stderr"].items():
                out.append("N=%d %s, exit %s stderr (digits as #):" % (r["n"], r["server"], status))
                for text, count in sorted(lines.items(), key=lambda kv: -kv[1])[:10]:
                    out.append("    %5d× %s" % (count, text))
            if r["stragglers"]:
                out.append("N=%d %s: %d stragglers killed at the timeout"
                           % (r["n"], r["server"], len(r["stragglers"])))
    if results["waiters"]:
        out.append("### Waiters: N × `run-locked -w 600`, queued in order, %d ms sections"
                   % results.get("hold_ms", 5))
        out.append("")
        out += waiters_table(results["waiters"])
        out.append("")
        for r in results["waiters"]:
            if r["stderr_line_count"]:
                out.append("waiters %d: %d stderr lines, first: %s"
                           % (r["n"], r["stderr_line_count"], r["stderr_lines"][:5]))
    out.append("### Extrapolation to %d hosts" % HOSTS)
    out.append("")
    out.append(results["extrapolation"])
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nxlock", default=os.path.join(ROOT, "build", "bench", "nxlock"))
    parser.add_argument("--section", default=os.path.join(ROOT, "build", "bench", "section"))
    parser.add_argument("--sizes", default="500,1000,2000")
    parser.add_argument("--waiters", default="100,500,2000")
    parser.add_argument("--hold-ms", type=int, default=5)
    parser.add_argument("--tuned", choices=("auto", "always", "never"), default="auto")
    parser.add_argument("--tuned-backlog", type=int,
                        help="tcp-backlog of the tuned server (default: somaxconn)")
    parser.add_argument("--tuned-maxclients", type=int,
                        help="maxclients of the tuned server (default: max(10000, 3 N))")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds each burst or waiters run may take")
    parser.add_argument("--skip", default="", help="comma list of: burst,waiters")
    parser.add_argument("--json", help="write the raw results here (- for stdout)")
    parser.add_argument("--from-json", metavar="FILE",
                        help="measure nothing: print the tables of an earlier --json")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            print(report(json.load(f)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    counts = [int(s) for s in args.waiters.split(",") if s]
    skip = set(filter(None, args.skip.split(",")))
    somaxconn = read_int("/proc/sys/net/core/somaxconn")
    syn_backlog = read_int("/proc/sys/net/ipv4/tcp_max_syn_backlog")
    cpus = os.cpu_count()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(3 * max(sizes + counts + [0]) + 1024, soft)
    if hard != resource.RLIM_INFINITY and want > hard:
        want = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    tmp = tempfile.mkdtemp(prefix="nxlock-burst-")
    servers = []
    results = {"machine": {"cpus": cpus, "somaxconn": somaxconn,
                           "tcp_max_syn_backlog": syn_backlog,
                           "tcp_syncookies": read_int("/proc/sys/net/ipv4/tcp_syncookies"),
                           "rlimit_nofile": want},
               "bursts": [], "waiters": [], "server_warnings": {}, "hold_ms": args.hold_ms}
    try:
        # A private copy: another build relinking build/bench/nxlock mid-run would make
        # some of a burst's execs fail (ETXTBSY, ENOENT) and mix two binaries in one table.
        nxlock = os.path.join(tmp, "nxlock")
        shutil.copy2(args.nxlock, nxlock)
        with open(nxlock, "rb") as f:
            results["nxlock"] = {"path": os.path.abspath(args.nxlock),
                                 "sha256": hashlib.sha256(f.read()).hexdigest(),
                                 "mtime": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(
                                     os.stat(args.nxlock).st_mtime))}
        print("nxlock %s (sha256 %s, built %s)"
              % (args.nxlock, results["nxlock"]["sha256"][:12], results["nxlock"]["mtime"]),
              file=sys.stderr)
        section = args.section
        if not os.path.exists(section):
            section = os.path.join(tmp, "section")
            subprocess.run(["cc", "-O2", "-o", section, os.path.join(ROOT, "bench", "section.c")],
                           check=True, timeout=120)

        def server(label, extra):
            srv = Redis(tmp, label, extra)
            servers.append(srv)
            results["redis_version"] = srv.version
            return srv

        if "burst" not in skip:
            srv = server("default", [])
            print("somaxconn %s, tcp_max_syn_backlog %s; redis-server %s: tcp-backlog %d, "
                  "maxclients %d; RLIMIT_NOFILE %d"
                  % (somaxconn, syn_backlog, srv.version, srv.backlog, srv.maxclients, want),
                  file=sys.stderr)
            need_tuning = []
            for n in sizes:
                r = burst(nxlock, srv, n, tmp, args.timeout)
                results["bursts"].append(r)
                print("  burst %d (default): ran %d, %s, p50/p99/max %s/%s/%s ms, overflows %d"
                      % (n, r["ran"], statuses_text(r["statuses"]), fmt(r["latency_ms"]["p50"]),
                         fmt(r["latency_ms"]["p99"]), fmt(r["latency_ms"]["max"]),
                         r["listen_overflows"]), file=sys.stderr)
                if (not r["ok"] or r["rejected"] or r["listen_overflows"]
                        or r["listen_drops"]):
                    need_tuning.append(n)
            results["server_warnings"]["default"] = srv.warnings()
            srv.stop()
            servers.remove(srv)
            if args.tuned == "always" or (args.tuned == "auto" and need_tuning):
                backlog = args.tuned_backlog or somaxconn or 4096
                maxclients = args.tuned_maxclients or max(10000, 3 * max(sizes))
                srv = server("tuned", ["--tcp-backlog", str(backlog),
                                       "--maxclients", str(maxclients)])
                results["tuned"] = {"because_of_sizes": need_tuning, "tcp_backlog": backlog,
                                    "maxclients": maxclients}
                for n in sizes:
                    r = burst(nxlock, srv, n, tmp, args.timeout)
                    results["bursts"].append(r)
                    print("  burst %d (tuned): ran %d, %s, p50/p99/max %s/%s/%s ms, overflows %d"
                          % (n, r["ran"], statuses_text(r["statuses"]),
                             fmt(r["latency_ms"]["p50"]), fmt(r["latency_ms"]["p99"]),
                             fmt(r["latency_ms"]["max"]), r["listen_overflows"]),
                          file=sys.stderr)
                results["server_warnings"]["tuned"] = srv.warnings()
                srv.stop()
                servers.remove(srv)
        if "waiters" not in skip:
            srv = server("waiters", [])
            for n in counts:
                r = waiters(nxlock, section, srv, n, tmp, args.hold_ms,
                            max(args.timeout, n * (args.hold_ms / 1000.0 + 0.1)))
                results["waiters"].append(r)
                print("  waiters %d: ran %d, lost %d, overlaps %d, out of order %d, %.1f commands "
                      "per section" % (n, r["ran"], r["lost"], r["overlaps"], r["out_of_order"],
                                       r["per_section"]["commandstats"]), file=sys.stderr)
            results["server_warnings"]["waiters"] = srv.warnings()
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(report(results))
    if args.json:
        text = json.dumps(results, indent=2, sort_keys=True)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    # The bursts pass when the last server configuration tried passed.
    final = "tuned" if "tuned" in results else "default"
    ok = all(r["ok"] for r in results["bursts"] if r["server"] == final)
    ok = ok and all(r["ok"] for r in results["waiters"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
