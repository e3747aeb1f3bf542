"""The one place that starts real servers, for the CLI tests, the model checker
(tests/model/backends.py) and the nemesis (tests/nemesis/): a redis-server on a free
loopback port and a unix socket (RedisServer: restartable on its port and directory, by
a crash or a clean shutdown, pausable, on more addresses if asked), and start_server(),
which redis-sentinel (sentinel_harness.py), a Cluster's nodes and TLS-only Redis
(deployments.py) and etcd (etcd_harness.py) are started through too.

Every server dies with the thread that started it (PR_SET_PDEATHSIG, through
setpriv), is stopped by its pid, and its directory removed; SERVER_STARTED lets a
caller (the nemesis) register each one as it starts.
"""
import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
COMMAND_TIMEOUT = 30  # seconds: no single nxlock call in the tests may hang longer

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_parent():
    """preexec_fn: the child is killed if the test process dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def dying_with_parent(args):
    """The command `args`, run so that it is killed if the test process dies: setpriv
    sets the parent-death signal, then execs it (the same pid). Cheaper than the
    preexec_fn above, with which Python forks the whole test process for each child
    instead of vforking."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *args]


def wait_for(predicate, timeout=10.0, interval=0.02):
    """Polls `predicate` until it is true or `timeout` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)  # the poll's interval: `timeout` bounds the wait
    return predicate()


def wait_answering(process, address, timeout=10.0):
    """True once the server at `address` ((host, port), or a unix socket path) answers
    PING (or asks for a password); False if `process` exits or `timeout` passes."""
    def answers():
        try:
            family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
            with socket.socket(family) as s:
                s.settimeout(0.5)
                s.connect(address)
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    return wait_for(lambda: process.poll() is not None or answers(), timeout) and \
        process.poll() is None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Called with each server process started by start_server (the nemesis registers them
# there, to kill what still runs when it is interrupted).
SERVER_STARTED = []


def start_server(args, **kwargs):
    """Starts a server (redis-server, redis-sentinel, etcd) that dies with the thread that
    started it (dying_with_parent); output to /dev/null unless given."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    kwargs.setdefault("stderr", subprocess.DEVNULL)
    process = subprocess.Popen(dying_with_parent(args), **kwargs)
    for hook in SERVER_STARTED:
        hook(process)
    return process


def stop_server(process, directory):
    """Stops a server process we started (SIGTERM, SIGKILL after 3 s) and removes its directory.
    A paused server (SIGSTOP) is continued first, so that it can act on the SIGTERM."""
    if process and process.poll() is None:
        process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    shutil.rmtree(directory, ignore_errors=True)


class RedisServer:
    """A redis-server on 127.0.0.1:<free port> and a unix socket, for one test module, a
    model checker's run or a nemesis scenario. `bind`: addresses it also listens on (a
    network namespace's veth pair); `extra`: more command-line options. It can be
    restarted on its port and directory (a crash, or a clean shutdown), and paused."""

    def __init__(self, password=None, extra=(), bind=()):
        self.dir = tempfile.mkdtemp(prefix="nxlock-redis-")
        self.password = password
        self.unix_path = os.path.join(self.dir, "redis.sock")
        self.extra = list(extra)
        self.bind = ["127.0.0.1", *bind]
        self.paused = False
        for _ in range(5):
            self.port = free_port()
            if self._start():
                atexit.register(lambda: stop_server(self.process, self.dir))
                return
            # Another try in the same directory (stop() would remove it, and the log
            # that says why, which the error below names).
        raise RuntimeError("redis-server did not start; see " + self.dir)

    def _start(self):
        """Starts the server on self.port; True once it answers, else it is gone again."""
        self.process = start_server(self._start_args())
        if self._wait_ready():
            return True
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        return False

    def _start_args(self):
        """The server's command line (subclasses change it: a TLS-only server)."""
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", *self.bind,
                "--unixsocket", self.unix_path, "--unixsocketperm", "700",
                "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
        if self.password:
            args += ["--requirepass", self.password]
        return args + self.extra

    def _wait_ready(self):
        # The unix socket, which is this server's own (its directory is): the TCP port
        # may answer for another test's server that took it first, while ours is still
        # failing to bind it. Redis opens its TCP port before its unix socket, and exits
        # if it cannot, so an answer here means the port is ours too.
        return wait_answering(self.process, self.unix_path)

    @property
    def url(self):
        auth = ":%s@" % self.password if self.password else ""
        return "redis://%s127.0.0.1:%d" % (auth, self.port)

    def url_for(self, host):
        """Its URL at another of its addresses (`bind`)."""
        auth = ":%s@" % self.password if self.password else ""
        return "redis://%s%s:%d" % (auth, host, self.port)

    @property
    def unix_url(self):
        return "unix://" + self.unix_path

    def cli(self, *args, timeout=COMMAND_TIMEOUT):
        """Runs redis-cli against this server; returns stdout as bytes."""
        env = dict(os.environ)
        if self.password:
            env["REDISCLI_AUTH"] = self.password
        return subprocess.run([REDIS_CLI, "-p", str(self.port), *args], env=env,
                              capture_output=True, check=True, timeout=timeout).stdout

    def flushall(self):
        self.cli("FLUSHALL")

    def restart(self, crash=False):
        """Stops the server, by SIGKILL if `crash` (nothing is flushed that was not
        already), else by SIGTERM (a clean shutdown: it finishes its AOF if it keeps
        one), and starts it again on the same port and directory."""
        self.resume()
        if self.process.poll() is None:
            if crash:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self._start():
            raise RuntimeError("redis-server did not come back; see " + self.dir)

    def pause(self):
        """SIGSTOP: the server answers nothing until resume()."""
        self.process.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        if self.paused:
            self.process.send_signal(signal.SIGCONT)
            self.paused = False

    def stop(self):
        stop_server(self.process, self.dir)
