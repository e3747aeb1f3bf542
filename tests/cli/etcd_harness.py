"""etcd for the tests: one member or a cluster of three on free loopback ports.

Fast raft timing (heartbeat 50 ms, election 500 ms: production's defaults are
100 ms and 1 s) so a leader's loss heals in about a second. Data lives in a temp
dir; every member is started here and stopped by its pid (SIGKILL through
PR_SET_PDEATHSIG too if the test dies). JOB and events: a job that logs its start, its
fence and the SIGTERM that stops it, for the etcd fault tests.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.request

from harness import NxlockTestCase, read, wait_for
from servers import free_port, start_server

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


def post(port, path, body, timeout=2.0):
    """One call to the member's JSON gateway; the answer, or None if it did not answer."""
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                     data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read())
    except (OSError, ValueError):
        return None


class Member:
    def __init__(self, name, directory):
        self.name = name
        self.dir = os.path.join(directory, name)
        self.client_port = free_port()
        self.peer_port = free_port()
        self.process = None

    @property
    def peer_url(self):
        return "http://127.0.0.1:%d" % self.peer_port

    def start(self, initial_cluster, tls=None, hosts=(), timing=(50, 500)):
        """`tls`: (certificate, key, CA) for the client port (https), else plain.
        `hosts`: addresses to serve clients on besides loopback (a test's veth pair).
        `timing`: the heartbeat and election timeout, in ms."""
        self.initial, self.tls, self.hosts, self.timing = initial_cluster, tls, hosts, timing
        scheme = "https" if tls else "http"
        extra = ["--cert-file", tls[0], "--key-file", tls[1]] if tls else []
        listen = ",".join("%s://%s:%d" % (scheme, host, self.client_port)
                          for host in ("127.0.0.1", *hosts))
        log = open(self.dir + ".log", "ab")
        self.process = start_server(
            [ETCD, "--name", self.name, "--data-dir", self.dir,
             "--listen-client-urls", listen,
             "--advertise-client-urls", "%s://127.0.0.1:%d" % (scheme, self.client_port),
             "--listen-peer-urls", self.peer_url,
             "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", initial_cluster, "--initial-cluster-state", "new",
             "--heartbeat-interval", str(timing[0]), "--election-timeout", str(timing[1]),
             "--log-level", "warn", *extra],
            stdout=log, stderr=log)
        log.close()

    def restart(self):
        """Starts a stopped member again on its ports and data (the cluster's flags of a
        new cluster are ignored when the data dir is there)."""
        self.start(self.initial, self.tls, self.hosts, self.timing)

    def status(self):
        return post(self.client_port, "/v3/maintenance/status", {}, timeout=1.0)

    def watchers(self):
        """How many watches the member serves (its metrics), or None if it does not answer."""
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.client_port,
                                        timeout=1.0) as answer:
                text = answer.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("etcd_debugging_mvcc_watcher_total "):
                return int(float(line.split()[1]))
        return None

    def running(self):
        return self.process is not None and self.process.poll() is None

    def kill(self, signo=signal.SIGKILL):
        if self.running():
            self.process.send_signal(signo)
            if signo in (signal.SIGKILL, signal.SIGTERM):
                self.process.wait()


class EtcdCluster:
    """`size` members of one cluster, each with its data in the cluster's temp dir."""

    def __init__(self, size=1, tls=None, hosts=(), timing=(50, 500)):
        """`timing`: (heartbeat, election timeout) in ms; etcd's own defaults, (100, 1000),
        make its minimum lease TTL 2 s (1.5 election timeouts, rounded up)."""
        self.dir = tempfile.mkdtemp(prefix="nxlock-etcd-")
        self.members = [Member("m%d" % i, self.dir) for i in range(size)]
        self.user = None  # "USER:PASSWORD" for etcdctl, once auth is on
        initial = ",".join("%s=%s" % (m.name, m.peer_url) for m in self.members)
        for member in self.members:
            member.start(initial, tls, hosts, timing)
        if tls:
            # The plain probes of wait_leader() cannot reach it: etcdctl can.
            self.tls = tls
            if not wait_for(lambda: self.ctl("endpoint", "health", check=False).returncode == 0,
                            20, interval=0.05):
                raise AssertionError("etcd (TLS) did not start (logs in %s)" % self.dir)
        else:
            self.tls = None
            self.wait_leader()

    def wait_leader(self, timeout=20.0):
        """The member that leads, once every running member agrees on one that answers."""
        found = []

        def agreed():
            running = [m for m in self.members if m.running()]
            statuses = [m.status() for m in running]
            leaders = {s.get("leader") for s in statuses if s}
            if all(statuses) and len(leaders) == 1 and None not in leaders:
                leader_id = leaders.pop()
                found[:] = [member for member, status in zip(running, statuses)
                            if status["header"]["member_id"] == leader_id]
            return bool(found)
        if wait_for(agreed, timeout, interval=0.05):
            return found[0]
        raise AssertionError("etcd: no leader within %.0f s (logs in %s)" % (timeout, self.dir))

    def url(self, members=None, host="127.0.0.1"):
        chosen = self.members if members is None else members
        return "etcd://" + ",".join("%s:%d" % (host, m.client_port) for m in chosen)

    def endpoints(self, members=None):
        """The running members' client addresses (of `members`, if given)."""
        chosen = self.members if members is None else members
        return ",".join("127.0.0.1:%d" % m.client_port for m in chosen if m.running())

    def ctl(self, *args, timeout=15, check=True, members=None):
        """etcdctl against the running members (`members`: those only; a SIGSTOPped member
        still runs, and etcdctl would wait on it); CompletedProcess (text)."""
        env = dict(os.environ, ETCDCTL_API="3")
        tls = ["--cacert", self.tls[2]] if self.tls else []
        tls += ["--user", self.user] if self.user else []
        result = subprocess.run([ETCDCTL, "--endpoints", self.endpoints(members), *tls, *args],
                                capture_output=True, text=True, env=env, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError("etcdctl %s: %s" % (" ".join(args), result.stderr))
        return result

    def enable_auth(self, password):
        """Auth on, with the user root (role root) and `password`; etcdctl then uses them."""
        self.ctl("user", "add", "root:" + password)
        self.ctl("user", "grant-role", "root", "root")
        self.ctl("auth", "enable")
        self.user = "root:" + password

    def keys(self, prefix, members=None):
        """The keys under `prefix`, in create-revision order (asked of `members`, if given)."""
        out = self.ctl("get", "--prefix", prefix, "--keys-only", "--sort-by", "CREATE",
                       members=members).stdout
        return [line for line in out.splitlines() if line]

    def wipe(self):
        self.ctl("del", "", "--from-key")

    def stop(self):
        for member in self.members:
            member.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


HAVE_ETCD = os.path.exists(ETCD) and os.path.exists(ETCDCTL)


class OneMemberTestCase(NxlockTestCase):
    """Tests against a one-member etcd of the class's own, which each test's nxlock
    reaches through NXLOCK_URL, wiped before each test."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(1)
        cls.addClassCleanup(cls.etcd.stop)

    def setUp(self):
        super().setUp()
        self.env["NXLOCK_URL"] = self.etcd.url()
        self.etcd.wipe()


# The job: its fence token and the moment it starts, and the moment SIGTERM reaches it
# (CLOCK_MONOTONIC, the test's own clock), in the log named by its first argument.
JOB = """\
import os, signal, sys, time
def stop(signo, frame):
    with open(sys.argv[1], "a") as f:
        f.write("TERM %f\\n" % time.monotonic())
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(sys.argv[1], "a") as f:
    f.write("START %f %s\\n" % (time.monotonic(), os.environ["NXLOCK_FENCE"]))
time.sleep(float(sys.argv[2]))  # the job's length
"""


def events(log):
    """{"START": (time, fence), "TERM": (time,)} from a JOB log."""
    found = {}
    for line in read(log).splitlines():
        word, *rest = line.split()
        found.setdefault(word, (float(rest[0]), *map(int, rest[1:])))
    return found
