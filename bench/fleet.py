#!/usr/bin/env python3
"""A fleet of cron "hosts" running the same crontab line: how many times per tick does the job run?

usage: bench/fleet.py [--nxlock BIN] [--hosts N] [--ticks T] [--period S] [--jitter S]
                      [--job S] [--hold S] [--backends file,redis] [--seed N]

Every tick, N processes of `nxlock -q run-locked -n [--hold H] KEY job` start at
random moments 0..JITTER seconds after the tick (cron's start delay, load, clock
skew), as N hosts with the same crontab line would. The job appends one line to
a log and sleeps JOB seconds. The script counts the runs per tick, with and
without --hold, on the embedded store and on a redis-server it starts on a free
loopback port (and stops by its pid). The period must exceed JITTER + HOLD + 1 s
(the hold's end is rounded up to a whole second), or the next tick finds the
lock still held.
"""
import argparse
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die_with_parent():
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(directory):
    port = free_port()
    server = subprocess.Popen(
        [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(port),
         "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return server, "redis://127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.05)
    server.kill()
    server.wait()
    raise SystemExit("redis-server did not start")


def run_fleet(nxlock, url, key, hold, args, rng, log):
    """Runs args.ticks ticks; returns (runs per tick, exit statuses seen)."""
    job = "echo \"$FLEET_TICK $FLEET_HOST\" >> %s; sleep %s" % (log, args.job)
    statuses = {}
    started = time.monotonic()
    for tick in range(args.ticks):
        tick_at = started + tick * args.period
        offsets = sorted((rng.uniform(0, args.jitter), host) for host in range(args.hosts))
        hosts = []
        for offset, host in offsets:
            time.sleep(max(0.0, tick_at + offset - time.monotonic()))
            env = dict(os.environ, FLEET_TICK=str(tick), FLEET_HOST=str(host))
            command = [nxlock, "-q", "-u", url, "run-locked", "-n"]
            command += ["--hold", str(hold)] if hold else []
            command += [key, "sh", "-c", job]
            hosts.append(subprocess.Popen(command, env=env, preexec_fn=die_with_parent))
        for p in hosts:
            status = p.wait(timeout=args.period * 4)
            statuses[status] = statuses.get(status, 0) + 1
        time.sleep(max(0.0, tick_at + args.period - time.monotonic()))
    runs = [0] * args.ticks
    with open(log) as f:
        for line in f:
            runs[int(line.split()[0])] += 1
    return runs, statuses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nxlock", default=os.path.join(ROOT, "build", "test", "nxlock"))
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--ticks", type=int, default=4)
    parser.add_argument("--period", type=float, default=8.0)
    parser.add_argument("--jitter", type=float, default=2.0)
    parser.add_argument("--job", type=float, default=0.5)
    parser.add_argument("--hold", type=float, default=4.0)
    parser.add_argument("--backends", default="file,redis")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.period <= args.jitter + args.hold + 1:
        raise SystemExit("fleet.py: --period must exceed --jitter + --hold + 1")

    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="nxlock-fleet-")
    server = None
    try:
        urls = {}
        for backend in args.backends.split(","):
            if backend == "file":
                urls[backend] = "file://" + os.path.join(tmp, "store")
            elif backend == "redis":
                server, urls[backend] = start_redis(tmp)
            else:
                raise SystemExit("fleet.py: unknown backend " + backend)
        print("%d hosts, %d ticks of %gs, start jitter 0-%gs, job %gs, --hold %g"
              % (args.hosts, args.ticks, args.period, args.jitter, args.job, args.hold))
        print("%-6s %-12s %-24s %s" % ("store", "mode", "runs per tick", "exit statuses"))
        for backend, url in urls.items():
            for hold in (0, args.hold):
                key = "fleet-%s-%s" % (backend, hold)
                log = os.path.join(tmp, key + ".log")
                open(log, "w").close()
                runs, statuses = run_fleet(args.nxlock, url, key, hold, args, rng, log)
                mode = "--hold %g" % hold if hold else "no --hold"
                print("%-6s %-12s %-24s %s" % (backend, mode, " ".join(map(str, runs)),
                                                " ".join("%d:%d" % kv
                                                         for kv in sorted(statuses.items()))),
                      flush=True)
    finally:
        if server:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
