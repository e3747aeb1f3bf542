"""The processes the nemesis starts: started with PR_SET_PDEATHSIG, found again by pid
(with their descendants, through /proc), stopped, continued and killed by those pids only.

Every process started here is registered, and so is every server tests/cli/servers.py
starts for a scenario (adopt()); stop_all() (called from a finally and atexit) continues
whatever the nemesis paused and kills what is still running.
"""
import ctypes
import os
import signal
import subprocess
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000

_registry_lock = threading.Lock()
_registry = []  # every Popen started here
_paused = set()  # pids we sent SIGSTOP and not yet SIGCONT
# Set on Ctrl-C or SIGTERM: every scenario stops making rounds and every wait gives up.
aborting = threading.Event()


def _preexec(netns_path):
    def setup():
        # The child dies with the thread that started it: no orphan servers or clients.
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if netns_path:
            fd = os.open(netns_path, os.O_RDONLY)
            if _libc.setns(fd, _CLONE_NEWNET) != 0:
                os._exit(121)
            os.close(fd)
    return setup


def start(args, netns=None, **kwargs):
    """Popen(args) with PDEATHSIG, in network namespace `netns` (a name under /run/netns)."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    kwargs.setdefault("stderr", subprocess.DEVNULL)
    path = os.path.join("/run/netns", netns) if netns else None
    process = subprocess.Popen(args, preexec_fn=_preexec(path), **kwargs)
    with _registry_lock:
        _registry.append(process)
    return process


def adopt(process):
    """Registers a process started elsewhere (the servers tests/cli/servers.py starts), so
    that stop_all() kills it too."""
    with _registry_lock:
        _registry.append(process)


def wait_until(condition, timeout, interval=0.05):
    """Polls `condition` until true or `timeout` seconds pass (or the run is aborted);
    its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not aborting.is_set():
        if condition():
            return True
        time.sleep(interval)  # the poll's interval: `timeout` bounds the wait
    return condition()


def children(pid):
    """The pids whose parent is `pid`, read from /proc now."""
    return _children_by_parent().get(pid, [])


def descendants(pid):
    """The pids below `pid` (children, grandchildren...), read from /proc now."""
    by_parent = _children_by_parent()
    found, todo = [], [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _children_by_parent():
    by_parent = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        by_parent.setdefault(int(fields[1]), []).append(int(entry))
    return by_parent


def signal_pid(pid, signo):
    """Sends `signo` to `pid`; False if it is gone."""
    try:
        os.kill(pid, signo)
    except ProcessLookupError:
        return False
    with _registry_lock:
        if signo == signal.SIGSTOP:
            _paused.add(pid)
        elif signo == signal.SIGCONT:
            _paused.discard(pid)
    return True


def pause(pids):
    for pid in pids:
        signal_pid(pid, signal.SIGSTOP)


def resume(pids):
    for pid in pids:
        signal_pid(pid, signal.SIGCONT)


def kill_tree(process):
    """SIGKILL to a process we started and every process below it (continued first)."""
    if process.poll() is not None:
        return
    pids = [process.pid] + descendants(process.pid)
    resume(pids)
    for pid in pids:
        signal_pid(pid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def stop(process, timeout=5):
    """SIGTERM to a process we started, SIGKILL after `timeout` seconds; waits for it."""
    if process.poll() is not None:
        return
    signal_pid(process.pid, signal.SIGCONT)
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process)


def stop_all():
    """Continues every pid still paused and kills every registered process still running."""
    with _registry_lock:
        paused = list(_paused)
        running = [p for p in _registry if p.poll() is None]
    resume(paused)
    for process in running:
        kill_tree(process)
