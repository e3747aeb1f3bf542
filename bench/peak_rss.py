#!/usr/bin/env python3
"""Prints the peak RSS (VmHWM, KiB) of one process running COMMAND, sampled while it runs.

usage: peak_rss.py COMMAND [ARGS...]

VmHWM is the process's own high-water mark since exec, so sampling it while the
lock holder waits for its child (`sleep 1`) measures the holder alone, not the
child; /usr/bin/time -f %M would report the larger of the two.
"""
import re
import signal
import subprocess
import sys
import time


def vmhwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as status:
            match = re.search(r"^VmHWM:\s+(\d+) kB", status.read(), re.M)
    except OSError:
        return None
    return int(match.group(1)) if match else None  # a zombie has no VmHWM


def main():
    # bench/run stops us with SIGTERM on Ctrl-C: unwind through `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    process = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
    peak = 0
    try:
        while process.poll() is None:
            peak = max(peak, vmhwm_kib(process.pid) or 0)
            time.sleep(0.01)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if process.returncode != 0 or peak == 0:
        print("peak_rss: %s exited %d (peak %d KiB)" % (sys.argv[1:], process.returncode, peak),
              file=sys.stderr)
        return 1
    print(peak)
    return 0


if __name__ == "__main__":
    sys.exit(main())
