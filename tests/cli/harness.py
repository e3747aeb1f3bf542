"""Shared helpers for the tests that run the built nxlock binary.

Backends: a fresh embedded store in a temp dir, and a real redis-server that the
tests start on a free loopback port and a unix socket, and always stop (also if
the test process dies: the server gets SIGKILL through PR_SET_PDEATHSIG); for the
tests that ask for a behaviour (backends(offering=...)), also a Redis Cluster,
Sentinel, a quorum of three servers and etcd, started once per test class.
A failing test keeps its temp dir and prints its path.
"""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

# The servers (servers.py), and the helpers they share with the tests, which import them
# from here too.
from servers import (COMMAND_TIMEOUT, REDIS_CLI, REDIS_SERVER, SERVER_STARTED,  # noqa: F401
                     RedisServer, die_with_parent, dying_with_parent, free_port,
                     start_server, stop_server, wait_answering, wait_for)

BIN = os.environ.get("NXLOCK_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "test", "nxlock")


def sweep_stale_faketime():
    """faketime(1) names a semaphore and a shared-memory file after its pid and
    removes them as it exits; one that was killed leaves them behind, and the
    next faketime given that pid (pids wrap at 32768 here) fails with
    "sem_open: File exists". Those of processes that are gone are removed."""
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return
    for name in names:
        for prefix in ("sem.faketime_sem_", "faketime_shm_"):
            pid = name[len(prefix):]
            if name.startswith(prefix) and pid.isdigit() and not os.path.exists("/proc/" + pid):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass


def read(path):
    """A text file's contents, or "" if it does not exist (yet)."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def trace_shows_release(path, key):
    """True if the `-v` trace in file `path` shows a release of `key` that deleted our value.

    A client that got the lock before that release would have replaced the value,
    and the release would have deleted nothing: so a taker that succeeded while
    run-locked was still exiting came after the release, not during the job."""
    try:
        with open(path, "rb") as f:
            trace = f.read()
    except FileNotFoundError:
        return False
    return re.search(rb"DEL-IF-EQUAL " + re.escape(key.encode()) +
                     rb" \S+( if \S+ = \d+)? \xe2\x86\x92 1", trace) is not None


def side_key(key, suffix):
    """A key beside a lock ("fence", "holder", "queue"), as nxlock names it
    (store/keys.hpp): "{TAG}:SUFFIX:KEY", TAG the key's hash tag or the key itself."""
    tag = key
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            tag = key[start + 1:end]
    if "}" in tag:
        return "}" + suffix + ":" + key
    return "{" + tag + "}:" + suffix + ":" + key


def files_under(root):
    """Every non-directory entry under `root`, as paths relative to it."""
    found = set()
    for dirpath, _, names in os.walk(root):
        for name in names:
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def alive(pid, argv0=None):
    """True if process `pid` runs (a zombie counts as dead) and, given `argv0`, is
    still the program of that name we started (not a stranger that reused the pid)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return False
    except (FileNotFoundError, ProcessLookupError):
        return False
    if argv0 is None:
        return True
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0].endswith(argv0.encode())
    except (FileNotFoundError, ProcessLookupError):
        return False


def bucket_of(key):
    """The embedded store's bucket of a key: (stripe, name), FNV-1a 64 in hex
    (docs/STORE-FORMAT.md)."""
    h = 0xcbf29ce484222325
    for byte in key.encode():
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    name = "%016x" % h
    return name[:2], name


def proc_stat(pid):
    """(comm, state, ppid) of a process, or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return comm, fields[0], int(fields[1])


def descendants(root):
    """Every process descended from `root`, from one walk of /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None:
                children.setdefault(stat[2], []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_with_watchdog(pid, timeout=10.0):
    """SIGKILLs run-locked `pid` and its watchdog (its child named nxl-watchdog), so that
    neither acts on the other's death: the lock is then abandoned, left to its ttl (a
    dead nxlock's watchdog alone would release it). nxlock is stopped first, then the
    watchdog killed, then nxlock: a stopped watchdog would be sent SIGCONT by the kernel
    once nxlock's death orphaned its process group, and release the lock."""
    found = []
    wait_for(lambda: found.extend(child for child in descendants(pid)
                                  if (proc_stat(child) or ("",))[0] == "nxl-watchdog")
             or found, timeout=timeout)
    assert found, "no watchdog under nxlock %d" % pid
    os.kill(pid, signal.SIGSTOP)
    for each in (*found, pid):
        os.kill(each, signal.SIGKILL)
    return found[0]


class Subscriber:
    """A plain connection SUBSCRIBEd to one channel: it sees every message on it,
    such as a release's wake-up, whether or not a waiter's own poll tick beat it."""

    def __init__(self, port, channel):
        self.channel = channel.encode()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=COMMAND_TIMEOUT)
        self.sock.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n"
                          % (len(self.channel), self.channel))
        self.seen = b""
        self.wait_for(b"subscribe")

    def wait_for(self, kind, timeout=COMMAND_TIMEOUT):
        """True once a push of `kind` on the channel has arrived."""
        needle = b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(kind), kind, len(self.channel),
                                                     self.channel)
        deadline = time.monotonic() + timeout
        while needle not in self.seen and time.monotonic() < deadline:
            if select.select([self.sock], [], [], 0.2)[0]:
                chunk = self.sock.recv(4096)
                if not chunk:
                    break
                self.seen += chunk
        found = needle in self.seen
        self.seen = self.seen.split(needle, 1)[-1]
        return found

    def close(self):
        self.sock.close()


# --- The backend fixture: each behaviour's tests over every backend that offers it ---
#
# A test asks `self.backends(offering="shared")` and loops over what it gets with
# subTest(backend=...). NXLOCK_TEST_BACKENDS chooses the matrix:
#   default   every test on the embedded store and Redis (TCP, unix socket); the
#             tests marked @smoke also on Cluster, Sentinel, a quorum and etcd
#   classic   the first half of default: every test, no extra backend
#   smoke     the second half: only the @smoke tests (the others are skipped),
#             only on the extra backends (ctest runs the halves as two entries,
#             cli.X and cli.smoke.X, so that a long class waits on no cluster)
#   all       every test on every backend that offers what it asks for
#   NAME,...  every test on the backends named (file, redis, unix, cluster,
#             sentinel, quorum, etcd), where they offer it
# The extra deployments start once per test class, when a test first asks for
# them, and stop (by pid) in its class cleanup. docs/HACKING.md: adding a backend.
BACKENDS_ENV = "NXLOCK_TEST_BACKENDS"

# What a test may ask for (`offering=`), and who offers it (man/nxlock.1):
#   lock    exclusive holds: lock, unlock, renew, status, run-locked, --hold,
#           fencing tokens, a lost lock's policy, list
#   shared  --shared (LOCK KINDS: a quorum and etcd refuse it with 64)
#   slots   --slots (idem)
#   queue   a waiters' queue served in arrival order that the test can count
#           (side_key(KEY, "queue"), queued()): a quorum keeps none, and etcd's
#           line is its keys under KEY/ (ETCD)
#   kv      setnx, get, getset and del on the lock's own key, as a client of the
#           SETNX page does (a quorum refuses them with 64; on etcd the lock is
#           keys under KEY/, not KEY)
#   timestamp  an exclusive lock's value is the bare Unix second it expires at, as
#           the SETNX page has it (etcd's is EXPIRY@LEASE: ETCD)
#   redis   the keys in Redis, read with redis-cli (Backend.redis_cli)
#   replace run-locked --replace (a quorum and etcd refuse it with 64, for now)
EVERYTHING = frozenset({"lock", "shared", "slots", "queue", "kv", "timestamp", "redis",
                        "replace"})
OFFERS = {
    "file": EVERYTHING - {"redis"},
    "redis": EVERYTHING,
    "unix": EVERYTHING,
    "cluster": EVERYTHING,
    "sentinel": EVERYTHING,
    "quorum": frozenset({"lock", "timestamp"}),
    "etcd": frozenset({"lock"}),
}
CLASSIC = ("file", "redis", "unix")
EXTRAS = ("cluster", "sentinel", "quorum", "etcd")


def smoke(test):
    """Marks a test that the default run also runs on Cluster, Sentinel, a quorum and
    etcd (those that offer what it asks for): one or two per behaviour."""
    test.smoke = True
    return test


def matrix_mode():
    """NXLOCK_TEST_BACKENDS as given ("default" when unset)."""
    return os.environ.get(BACKENDS_ENV, "default").strip() or "default"


def matrix_choice():
    """The backends NXLOCK_TEST_BACKENDS names: None for the default matrix and its
    halves (which depend on the test)."""
    choice = matrix_mode()
    if choice in ("default", "classic", "smoke"):
        return None
    if choice == "all":
        return CLASSIC + EXTRAS
    names = tuple(n.strip() for n in choice.split(",") if n.strip())
    unknown = [n for n in names if n not in OFFERS]
    if unknown:
        raise RuntimeError("%s: unknown backend %s (known: %s, or default, classic, "
                           "smoke, all)"
                           % (BACKENDS_ENV, ", ".join(unknown), ", ".join(OFFERS)))
    return names


class Backend:
    """Where nxlock keeps its keys for one test: a name, the --url (or the several
    --url of a quorum) to reach it, what it offers, and for Redis a redis-cli on
    the server that holds the keys.

    For a test that looks at what a backend keeps (tests/cli/test_nothing_piles_up.py):
    `servers`, a redis-cli (same calling form) on each Redis server that keeps keys
    of its own (a Cluster's masters, each server of a quorum; the one server
    otherwise; none for the embedded store and etcd), and `deployment`, the
    object the backend was started from (etcd's: etcd_harness.EtcdCluster)."""

    def __init__(self, name, url, offers=None, cli=None, servers=None, deployment=None):
        self.name = name
        self.urls = [url] if isinstance(url, str) else list(url)
        self.url = self.urls[0]
        self.offers = OFFERS.get(name, EVERYTHING) if offers is None else frozenset(offers)
        self._cli = cli
        self.servers = list(servers) if servers is not None else ([cli] if cli else [])
        self.deployment = deployment

    def args(self):
        found = []
        for url in self.urls:
            found += ["-u", url]
        return found

    def redis_cli(self, *args):
        """redis-cli on the server (and database) that holds this backend's keys; stdout
        as bytes. Only for backends that offer "redis"."""
        if self._cli is None:
            raise AssertionError("%s keeps no keys that redis-cli reads" % self.name)
        return self._cli(*args)

    @property
    def copies(self):
        """How many copies of a lock's key the backend keeps (values()): one on each
        server of a quorum, one elsewhere."""
        return len(self.servers) if self.name == "quorum" else 1

    def values(self, key):
        """The lock key's value in each copy the backend keeps (None where absent): on
        each server of a quorum, on the one server or store elsewhere. On etcd the lock
        is keys under KEY/: the list of those keys (None if there are none)."""
        def text(out):
            return out.decode(errors="replace").strip() or None
        if self.name == "quorum":
            return [text(cli("GET", key)) for cli in self.servers]
        if self.name == "etcd":
            return [self.deployment.keys(key + "/") or None]
        if self._cli is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("NXLOCK_")}
            return [text(subprocess.run([BIN, *self.args(), "get", key], capture_output=True,
                                        env=env, timeout=COMMAND_TIMEOUT).stdout)]
        return [text(self.redis_cli("GET", key))]

    def __repr__(self):
        return self.name


class ExtraBackend:
    """A deployment started for one test class: `backend` names it for the tests,
    `wipe` empties it before each test that uses it, `stop` ends its processes."""

    def __init__(self, backend, wipe, stop):
        self.backend, self.wipe, self.stop = backend, wipe, stop


def start_cluster():
    from deployments import Cluster
    cluster = Cluster()

    def cluster_cli(*args):
        # -c follows MOVED to the node that owns the key.
        return subprocess.run([REDIS_CLI, "-c", "-p", str(cluster.nodes[0].port), *args],
                              capture_output=True, check=True, timeout=COMMAND_TIMEOUT).stdout

    return ExtraBackend(Backend("cluster", cluster.url(), cli=cluster_cli,
                                servers=[node.cli for node in cluster.nodes],
                                deployment=cluster),
                        cluster.flushall, cluster.stop)


def start_sentinel():
    from sentinel_harness import Deployment
    # One replica: nxlock then waits for it to confirm each write, as in production.
    deployment = Deployment(replicas=1)
    return ExtraBackend(Backend("sentinel", deployment.url(), cli=deployment.master.cli,
                                deployment=deployment),
                        deployment.master.flushall, deployment.stop)


def start_quorum():
    servers = []
    try:
        for _ in range(3):
            servers.append(RedisServer())
    except BaseException:
        for server in servers:
            server.stop()
        raise

    def wipe():
        for server in servers:
            server.flushall()

    def stop():
        for server in servers:
            server.stop()

    return ExtraBackend(Backend("quorum", [s.url for s in servers],
                                servers=[s.cli for s in servers], deployment=servers),
                        wipe, stop)


def start_etcd():
    from etcd_harness import EtcdCluster
    etcd = EtcdCluster(1)
    return ExtraBackend(Backend("etcd", etcd.url(), deployment=etcd), etcd.wipe, etcd.stop)


# How each extra backend starts (tests/model/backends.py starts the same deployments
# for the model checker).
STARTERS = {"cluster": start_cluster, "sentinel": start_sentinel, "quorum": start_quorum,
            "etcd": start_etcd}


def test_failed(case):
    """True if the running test `case` has failed so far, in a subTest too (its failure is
    recorded under the subTest, and a cleanup runs with the outcome's success reset)."""
    outcome = getattr(case, "_outcome", None)
    result = getattr(outcome, "result", None)
    problems = list(getattr(result, "errors", [])) + list(getattr(result, "failures", []))
    return (any(getattr(test, "test_case", test) is case for test, _ in problems)
            or not getattr(outcome, "success", True))


class NxlockTestCase(unittest.TestCase):
    """Gives each test a temp dir (kept and printed on failure) and a `nx` runner."""

    redis = None  # set by setUpClass in modules that need Redis

    @classmethod
    def start_redis(cls, **kwargs):
        cls.redis = RedisServer(**kwargs)
        cls.addClassCleanup(cls.redis.stop)

    def setUp(self):
        if matrix_mode() == "smoke" and not self._smoke():
            self.skipTest("%s=smoke runs the @smoke tests alone" % BACKENDS_ENV)
        sweep_stale_faketime()
        self.tmp = tempfile.mkdtemp(prefix="nxlock-test-")
        self.store_path = os.path.join(self.tmp, "store")
        self.addCleanup(self._cleanup_tmp)
        self.env = dict(os.environ)
        for name in ("NXLOCK_URL", "NXLOCK_PREFIX", "NXLOCK_PASSWORD", "REDISCLI_AUTH"):
            self.env.pop(name, None)
        self.env["NXLOCK_STORE"] = self.store_path
        if self.redis:
            self.redis.flushall()

    def _cleanup_tmp(self):
        if test_failed(self):
            print("\nkept temp dir of failed test:", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def queued(self, backend, queue):
        """How many waiters the waiters' queue `queue` (side_key(KEY, "queue")) holds."""
        if backend.name == "file":
            r = self.nx(*backend.args(), "get", queue)
            return len(r.stdout.decode().strip().splitlines()) if r.returncode == 0 else 0
        return int(backend.redis_cli("ZCARD", queue).strip() or 0)

    def backends(self, offering=None, by_default=CLASSIC, lacking=()):
        """The backends this test runs on.

        Without `offering`: the embedded store and, when the class started Redis,
        Redis over TCP and the unix socket. With it (a behaviour of OFFERS, or several):
        those of the matrix (NXLOCK_TEST_BACKENDS) that offer it, the extra
        deployments started on first use. `lacking`: only those that do not offer
        this (or any of these), for a test of how a backend refuses it.
        `by_default`: the classic backends the default matrix runs the test on (a
        slow test may leave out the unix socket, which is Redis over TCP again);
        "all" runs it on every one."""
        classic = [Backend("file", "file://" + self.store_path)]
        if self.redis:
            # Separate databases, so one test can use both without their keys meeting.
            redis = self.redis
            classic.append(Backend("redis", redis.url + "/1",
                                   cli=lambda *a: redis.cli("-n", "1", *a)))
            classic.append(Backend("unix", redis.unix_url + "?db=2",
                                   cli=lambda *a: redis.cli("-n", "2", *a)))
        if offering is None and not lacking:
            return classic
        offering = offering or "lock"
        wanted = {offering} if isinstance(offering, str) else set(offering)
        refused = {lacking} if isinstance(lacking, str) else set(lacking)
        unknown = (wanted | refused) - EVERYTHING
        if unknown:
            raise AssertionError("no backend offers %s" % ", ".join(sorted(unknown)))

        def fits(offers):
            return wanted <= offers and not refused & offers

        names = matrix_choice()
        if names is None:
            mode = matrix_mode()
            names = tuple(by_default) if mode != "smoke" else ()
            if mode != "classic" and self._smoke():
                names += EXTRAS
        found = []
        for backend in classic:
            if backend.name in names and fits(backend.offers):
                found.append(backend)
        for name in EXTRAS:
            if name in names and fits(OFFERS[name]):
                found.append(self._extra(name))
        return found

    def backends_named(self, *names):
        """The classic backends of these names ("file", "redis", "unix"), in that order,
        whatever the matrix: for a test of what only they show (a file on disk, Redis's
        keys), or a slow one kept to the embedded store and Redis over TCP."""
        started = {backend.name: backend for backend in self.backends()}
        missing = [name for name in names if name not in started]
        if missing:
            raise AssertionError("no backend %s here (Redis: the class calls start_redis)"
                                 % ", ".join(missing))
        return [started[name] for name in names]

    def backend_named(self, name):
        """The classic backend of this name (backends_named)."""
        return self.backends_named(name)[0]

    def _smoke(self):
        """True if this test is marked @smoke."""
        return getattr(getattr(self, self._testMethodName, None), "smoke", False)

    # Tests that ask for backends from several threads at once start each deployment once.
    _extras_lock = threading.Lock()

    def _extra(self, name):
        """The class's deployment of extra backend `name`, started on first use and
        wiped once per test."""
        with self._extras_lock:
            return self._extra_locked(name)

    def _extra_locked(self, name):
        cls = type(self)
        started = cls.__dict__.get("_extras")
        if started is None:
            started = {}
            cls._extras = started
        extra = started.get(name)
        if extra is None:
            extra = STARTERS[name]()
            started[name] = extra
            cls.addClassCleanup(extra.stop)
            cls.addClassCleanup(started.pop, name, None)
        wiped = self.__dict__.setdefault("_wiped", set())
        if name not in wiped:
            extra.wipe()
            wiped.add(name)
        return extra.backend

    def nx(self, *args, input=None, timeout=COMMAND_TIMEOUT, env=None):
        """Runs nxlock with bytes or str arguments; returns CompletedProcess (bytes)."""
        return subprocess.run([BIN, *args], input=input, capture_output=True,
                              env=env or self.env, timeout=timeout)

    def nx_as_nobody(self, *args, env=None):
        """Runs nxlock as the user nobody (setpriv; the tests run as root), with the temp
        dir opened to it: a copy of the binary there, as the checkout may be private."""
        if os.geteuid() != 0:
            self.skipTest("needs root to run nxlock as nobody")
        os.chmod(self.tmp, 0o755)
        binary = os.path.join(self.tmp, "nxlock")
        if not os.path.exists(binary):
            shutil.copy(BIN, binary)
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               binary, *args], capture_output=True, env=env or self.env,
                              timeout=COMMAND_TIMEOUT)

    def popen(self, *args, **kwargs):
        kwargs.setdefault("env", self.env)
        command = [BIN, *args]
        return subprocess.Popen(command if "preexec_fn" in kwargs else dying_with_parent(command),
                                **kwargs)

    def assertOneLineError(self, result, status, *fragments):
        """The contract's error shape: exit `status`, one `nxlock: …` line on stderr."""
        err = result.stderr.decode(errors="replace")
        self.assertEqual(result.returncode, status, err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("nxlock: "), err)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
