#!/usr/bin/env python3
"""Locks per second for distinct keys: the figure a fleet's owner sizes a cluster by.

usage: bench/sizing.py [--nxlock BIN] [--seconds S] [--clients 1,10,50]
                       [--backends floor,etcd3,redis,file] [--dir DIR (/var/tmp)]

For each backend and each concurrency C, C client loops run for S seconds, each
doing `nxlock -q -u URL run-locked -n KEY_i true` again and again on its own key
(distinct keys: nothing contends), and the locks completed (exit status 0) are
counted. Prints locks per second, each run's latency (median, p99), the servers' CPU
per lock and the machine's CPUs busy over the row; then etcd's proposals and WAL
fsyncs per lock, and the disk's own fdatasync time.

Backends, all started here on 127.0.0.1 and free ports, with their data under one
private temp dir on this machine's disk (--dir; tmpfs is refused, since the figure
is about disks):
  etcd3  a three-member etcd cluster (Debian's etcd, its default raft timing and
         fsync per write), the URL naming all three members;
  redis  one redis-server (no persistence: Redis's writes never wait on the disk);
  file   the embedded store (file://DIR, its default: no fsync);
  floor  no lock: the same loops spawning `true`, the driver's own ceiling.
Servers are started through tests/cli/servers.py, stopped by their pid, and the temp
dir removed, on success, failure and Ctrl-C. Every wait is bounded.
"""
import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
from servers import (die_with_parent, free_port, start_server, stop_server,  # noqa: E402
                     wait_answering, wait_for)

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
TRUE = shutil.which("true") or "/bin/true"
RUN_TIMEOUT = 30  # seconds: one run-locked longer than this is killed and counted as failed


def filesystem(path):
    """"ext4 /dev/vda": the file system `path` is on, and its device."""
    return " ".join(subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "--target", path],
                                   capture_output=True, text=True, timeout=10).stdout.split())


def fsync_ms(directory, count=200):
    """The disk's own cost: the median of `count` 4 KiB appends each followed by fdatasync."""
    path = os.path.join(directory, "fsync-probe")
    took = []
    with open(path, "wb", buffering=0) as f:
        for _ in range(count):
            started = time.monotonic()
            f.write(b"x" * 4096)
            os.fdatasync(f.fileno())
            took.append(time.monotonic() - started)
    os.unlink(path)
    return percentile(took, 50) * 1000


def start_etcd(tmp, servers):
    """Three members of one cluster; their URL once a lock goes through."""
    members = [("m%d" % i, free_port(), free_port()) for i in range(3)]
    initial = ",".join("%s=http://127.0.0.1:%d" % (name, peer) for name, _, peer in members)
    for name, client, peer in members:
        directory = os.path.join(tmp, "etcd-" + name)
        log = open(directory + ".log", "ab")
        process = start_server(
            [ETCD, "--name", name, "--data-dir", directory,
             "--listen-client-urls", "http://127.0.0.1:%d" % client,
             "--advertise-client-urls", "http://127.0.0.1:%d" % client,
             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", initial, "--initial-cluster-state", "new",
             "--log-level", "warn"], stdout=log, stderr=log)
        log.close()
        servers.append((process, directory))
    return "etcd://" + ",".join("127.0.0.1:%d" % client for _, client, _ in members)


def etcd_counters(url):
    """Summed over the members: (WAL fsyncs, their seconds, proposals committed by the
    leader), from each member's /metrics."""
    fsyncs = seconds = committed = 0.0
    for address in url[len("etcd://"):].split(","):
        try:
            with urllib.request.urlopen("http://%s/metrics" % address, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "etcd_disk_wal_fsync_duration_seconds_count":
                fsyncs += float(value)
            elif name == "etcd_disk_wal_fsync_duration_seconds_sum":
                seconds += float(value)
            elif name == "etcd_server_is_leader" and float(value) == 1:
                for other in text.splitlines():
                    if other.startswith("etcd_server_proposals_committed_total "):
                        committed = float(other.split()[1])
    return fsyncs, seconds, committed


def start_redis(tmp, servers):
    directory = os.path.join(tmp, "redis")
    os.mkdir(directory)
    sock = os.path.join(directory, "redis.sock")
    port = free_port()
    process = start_server(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--unixsocket", sock,
         "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
         "--daemonize", "no", "--dir", directory,
         "--logfile", os.path.join(directory, "redis.log")])
    servers.append((process, directory))
    if not wait_answering(process, sock, timeout=15):
        raise SystemExit("sizing.py: redis-server did not start (log in %s)" % directory)
    return "redis://127.0.0.1:%d" % port


_NULL = os.open(os.devnull, os.O_RDWR)
_QUIET = [(os.POSIX_SPAWN_DUP2, _NULL, fd) for fd in (0, 1, 2)]


def one_lock(nxlock, url, key):
    """One `run-locked -n KEY true`; (exit status, seconds). posix_spawn and a pidfd, not
    subprocess: the driver's own cost per run is less than half of subprocess.run's."""
    command = [nxlock, "-q", "-u", url, "run-locked", "-n", key, "true"] if url else [TRUE]
    started = time.monotonic()
    pid = os.posix_spawn(command[0], command, os.environ, file_actions=_QUIET)
    status = None
    try:
        pidfd = os.pidfd_open(pid)
        try:
            ready = select.select([pidfd], [], [], RUN_TIMEOUT)[0]
        finally:
            os.close(pidfd)
        if ready:
            status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        if status is None:  # a timeout, or this client interrupted: the run goes too
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return ("timeout" if status is None else status), time.monotonic() - started


CLIENTS = set()  # the client processes running (stopped by pid if we are interrupted)


def stop_clients():
    """SIGTERM to each client (it kills its run and exits), SIGKILL after 5 s."""
    for pid in list(CLIENTS):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for pid in list(CLIENTS):
        pidfd = os.pidfd_open(pid)
        if not select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
        os.waitpid(pid, 0)
        CLIENTS.discard(pid)


def client(nxlock, url, key, begin, end, out):
    """One client loop, in its own process: runs from `begin` until `end` (monotonic
    seconds, one clock for every process), then writes its results to `out`."""
    time.sleep(max(0.0, begin - time.monotonic()))
    latencies, failures = [], {}
    while time.monotonic() < end:
        status, took = one_lock(nxlock, url, key)
        if status == 0:
            latencies.append(took)
        else:
            failures[str(status)] = failures.get(str(status), 0) + 1
    with open(out, "w") as f:
        json.dump({"latencies": latencies, "failures": failures, "end": time.monotonic()}, f)


def measure(nxlock, url, clients, seconds, tag, tmp, pids):
    """C client loops for `seconds`, each a process of its own (threads would share one
    interpreter lock, which caps the spawns a second); (locks/s, latencies of the
    successful runs, failures by status, and the CPU seconds (the servers `pids`, the
    machine busy, the machine in all) from `begin` to `end`)."""
    begin = time.monotonic() + 0.5 + clients * 0.01  # every client forked by then
    end = begin + seconds
    children = {}
    for i in range(clients):
        out = os.path.join(tmp, "client-%s-%d-%d.json" % (tag, clients, i))
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                die_with_parent()
                client(nxlock, url, "sizing-%s-c%d-%d" % (tag, clients, i), begin, end, out)
                code = 0
            finally:
                os._exit(code)
        children[pid] = out
        CLIENTS.add(pid)
    time.sleep(max(0.0, begin - time.monotonic()))
    cpu_begin = cpu_seconds(pids)
    time.sleep(max(0.0, end - time.monotonic()))
    cpu = [y - x for x, y in zip(cpu_begin, cpu_seconds(pids))]
    latencies, failures, ends = [], {}, []
    deadline = end + RUN_TIMEOUT + 10
    for pid, out in children.items():
        pidfd = os.pidfd_open(pid)
        ready = select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]
        os.close(pidfd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        CLIENTS.discard(pid)
        if status != 0:
            raise SystemExit("sizing.py: a client loop failed (%d)" % status)
        with open(out) as f:
            result = json.load(f)
        os.unlink(out)
        latencies += result["latencies"]
        for k, n in result["failures"].items():
            failures[k] = failures.get(k, 0) + n
        ends.append(result["end"])
    # Runs started before the deadline finish after it: the window is to the last end.
    return len(latencies) / (max(ends) - begin), latencies, failures, cpu


def cpu_seconds(pids):
    """User + system CPU seconds the processes `pids` have used, and the machine's busy
    and total CPU seconds (/proc/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    used = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        used += int(fields[11]) + int(fields[12])  # utime, stime
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:9]]  # guest time is in user's already
    idle = cpu[3] + cpu[4]  # idle, iowait
    return used / tick, (sum(cpu) - idle) / tick, sum(cpu) / tick


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nxlock", default=os.path.join(ROOT, "build", "bench", "nxlock"))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", default="1,10,50")
    parser.add_argument("--backends", default="floor,etcd3,redis,file")
    parser.add_argument("--dir", default="/var/tmp",
                        help="where the private temp dir goes (not tmpfs)")
    args = parser.parse_args()
    nxlock = os.path.abspath(args.nxlock)
    if not os.access(nxlock, os.X_OK):
        raise SystemExit("sizing.py: no nxlock at %s (build it: see BENCHMARKS.md)" % nxlock)
    fs = filesystem(args.dir)
    if fs.split()[:1] in (["tmpfs"], ["ramfs"]):
        raise SystemExit("sizing.py: %s is %s; the figure is about disks" % (args.dir, fs))
    counts = [int(c) for c in args.clients.split(",")]
    backends = args.backends.split(",")
    for b in backends:
        if b not in ("floor", "etcd3", "redis", "file"):
            raise SystemExit("sizing.py: unknown backend " + b)

    # SIGINT and SIGTERM unwind to the cleanup below (SIGINT too when the shell that ran
    # us in the background had it ignored); a client process ends its loop on either.
    def interrupted(signo, frame):
        raise KeyboardInterrupt
    for signo in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signo, interrupted)
    tmp = tempfile.mkdtemp(prefix="nxlock-sizing-", dir=args.dir)
    servers = []
    try:
        urls = {}
        for b in backends:
            if b == "etcd3":
                urls[b] = start_etcd(tmp, servers)
            elif b == "redis":
                urls[b] = start_redis(tmp, servers)
            elif b == "floor":
                urls[b] = None
            else:
                urls[b] = "file://" + os.path.join(tmp, "store")
        # Each backend takes a first lock (etcd: once its members agree on a leader).
        for b, url in urls.items():
            if not wait_for(lambda: one_lock(nxlock, url, "sizing-warm")[0] == 0,
                            timeout=30, interval=0.2):
                raise SystemExit("sizing.py: no lock on %s within 30 s (logs in %s)" % (b, tmp))
        print("nxlock %s; %d CPUs; load average %s; data on %s (%s, a 4 KiB append + "
              "fdatasync: %.2f ms); %g s per row"
              % (nxlock, os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]),
                 tmp, fs, fsync_ms(tmp), args.seconds), flush=True)
        notes = []
        print("| backend | clients | locks/s | median | p99 | locks | failed "
              "| server CPU per lock | CPUs busy |")
        print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
        for b in backends:
            before = etcd_counters(urls[b]) if b == "etcd3" else None
            pids = [p.pid for p, _ in servers if b in ("etcd3", "redis") and
                    os.path.basename(p.args[4]) == ("etcd" if b == "etcd3" else "redis-server")]
            done = 0
            for c in counts:
                rate, lat, failures, (server, busy, total) = measure(
                    nxlock, urls[b], c, args.seconds, b, tmp, pids)
                done += len(lat)
                print("| %s | %d | %.0f | %.1f ms | %.1f ms | %d | %s | %s | %.2f of %d |"
                      % (b, c, rate, percentile(lat, 50) * 1000, percentile(lat, 99) * 1000,
                         len(lat), " ".join("%s:%d" % kv for kv in sorted(failures.items(),
                                                                         key=str)) or "0",
                         "%.2f ms" % (server / (rate * args.seconds) * 1000) if pids and lat
                         else "—",
                         busy / total * os.cpu_count(), os.cpu_count()),
                      flush=True)
            if before and done:
                after = etcd_counters(urls[b])
                fsyncs, secs, committed = (y - x for x, y in zip(before, after))
                notes.append("etcd3: per lock, %.1f proposals committed and %.1f WAL fsyncs "
                             "per member; a WAL fsync took %.2f ms on average"
                             % (committed / done, fsyncs / 3 / done,
                                secs / fsyncs * 1000 if fsyncs else float("nan")))
        if notes:
            print("\n".join(notes))
        print("load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    finally:
        stop_clients()
        for process, directory in reversed(servers):
            stop_server(process, directory)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
