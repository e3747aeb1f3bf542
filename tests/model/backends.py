"""The five backends the model checker drives: each starts its servers (tests/cli/servers.py,
deployments.py, etcd_harness.py), gives nxlock's global arguments, resets itself between
examples, and runs a SETNX-page client's steps on the lock key (nxlock's own key/value
commands on one server, redis-cli on one server of a quorum, since nxlock refuses them
with several URLs). On etcd the lock is keys under KEY/ named by leases (etcd's own
recipe), and nxlock's key/value commands act on the plain key KEY: the page steps there
are a separate key the lock must leave alone (machine.py, e_page).
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))

import harness  # noqa: E402
from servers import COMMAND_TIMEOUT, REDIS_CLI, RedisServer  # noqa: E402


class Backend:
    """One backend: `args` are nxlock's global arguments, `page_targets` how many servers a
    page client can write to (one, or each server of a quorum)."""

    name = "?"
    quorum = False
    etcd = False
    page_targets = 1

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="nxlock-model-%s-" % self.name)

    def args(self):
        raise NotImplementedError

    def reset(self):
        """Every key gone: a fresh start for the next example."""
        raise NotImplementedError

    def env(self):
        env = dict(os.environ)
        for name in ("NXLOCK_URL", "NXLOCK_PREFIX", "NXLOCK_PASSWORD", "REDISCLI_AUTH",
                     "NXLOCK_STORE"):
            env.pop(name, None)
        env["NXLOCK_STORE"] = os.path.join(self.tmp, "unused-store")
        return env

    def page(self, server, op, key, *values):
        """A page client's SETNX/GET/GETSET/DEL on `key`: (exit status, stdout text)."""
        result = subprocess.run([harness.BIN, *self.args(), op, key, *values],
                                capture_output=True, env=self.env(), timeout=COMMAND_TIMEOUT)
        return result.returncode, result.stdout.decode(errors="replace")

    def page_script(self, server, op, key, values):
        """The page step as a line of the reproducing script."""
        return "nx %s %s %s" % (op, key, " ".join(values))

    def script_setup(self):
        """Lines that set URL (and PORTS) for the reproducing script's own backend."""
        raise NotImplementedError

    def stop(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class Embedded(Backend):
    name = "embedded"

    def __init__(self):
        super().__init__()
        self.generation = 0

    def args(self):
        return ["-u", "file://" + os.path.join(self.tmp, "store%d" % self.generation)]

    def reset(self):
        shutil.rmtree(os.path.join(self.tmp, "store%d" % self.generation), ignore_errors=True)
        self.generation += 1

    def script_setup(self):
        return ['URLS="-u file://$T/store"']


class Redis(Backend):
    name = "redis"

    def __init__(self):
        super().__init__()
        self.server = RedisServer()

    def args(self):
        return ["-u", self.server.url]

    def reset(self):
        self.server.flushall()

    def script_setup(self):
        return ['PORT=$(shuf -i 20000-40000 -n 1)',
                'redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no '
                '--daemonize yes --pidfile "$T/redis.pid" --dir "$T" >/dev/null',
                'trap \'kill "$(cat "$T/redis.pid")"\' EXIT',
                'until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.05; done',
                'URLS="-u redis://127.0.0.1:$PORT"']

    def stop(self):
        self.server.stop()
        super().stop()


class Cluster(Backend):
    name = "cluster"

    def __init__(self):
        super().__init__()
        from deployments import Cluster as ClusterDeployment
        self.cluster = ClusterDeployment()

    def args(self):
        return ["-u", self.cluster.url()]

    def reset(self):
        self.cluster.flushall()

    def script_setup(self):
        return ['# a three-master Redis Cluster (tests/cli/deployments.py builds one);',
                '# set URLS="-u redis://HOST:PORT" to one of its nodes',
                'echo "set URLS to a cluster node" >&2; exit 2']

    def stop(self):
        self.cluster.stop()
        super().stop()


class Etcd(Backend):
    """One etcd member on loopback (Debian's etcd, tests/cli/etcd_harness.py). Exclusive
    holds only: --shared and --slots are refused (64), as the man page's ETCD says."""

    name = "etcd"
    etcd = True

    def __init__(self):
        super().__init__()
        from etcd_harness import EtcdCluster
        self.etcd = EtcdCluster(1)

    def args(self):
        return ["-u", self.etcd.url()]

    def reset(self):
        # Every key (a lease left without keys expires or is never named again).
        self.etcd.wipe()

    def script_setup(self):
        return ['PORT=$(shuf -i 20000-40000 -n 1); PEER=$((PORT + 1))',
                'etcd --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$PORT" '
                '--advertise-client-urls "http://127.0.0.1:$PORT" '
                '--listen-peer-urls "http://127.0.0.1:$PEER" '
                '--initial-advertise-peer-urls "http://127.0.0.1:$PEER" '
                '--initial-cluster "default=http://127.0.0.1:$PEER" --log-level error '
                '>"$T/etcd.log" 2>&1 & EPID=$!',
                'trap \'kill "$EPID"\' EXIT',
                'until etcdctl --endpoints "127.0.0.1:$PORT" endpoint health >/dev/null 2>&1; '
                'do sleep 0.1; done',
                'URLS="-u etcd://127.0.0.1:$PORT"']

    def stop(self):
        self.etcd.stop()
        super().stop()


class Quorum(Backend):
    name = "quorum"
    quorum = True
    page_targets = 3

    def __init__(self):
        super().__init__()
        self.servers = []
        try:
            for _ in range(3):
                self.servers.append(RedisServer())
        except BaseException:
            self.stop()
            raise

    def args(self):
        found = []
        for server in self.servers:
            found += ["-u", server.url]
        return found

    def reset(self):
        for server in self.servers:
            server.flushall()

    def page(self, server, op, key, *values):
        result = subprocess.run([REDIS_CLI, "-p", str(self.servers[server].port), op.upper(),
                                 key, *values], capture_output=True, timeout=COMMAND_TIMEOUT)
        return result.returncode, result.stdout.decode(errors="replace")

    def raw(self, key):
        """The lock key's value on each server (None where absent): a GET on a socket,
        not redis-cli (three processes a step were most of a quorum run's time)."""
        found = []
        for server in self.servers:
            with socket.create_connection(("127.0.0.1", server.port), timeout=COMMAND_TIMEOUT) as s:
                s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key.encode()))
                reply = b""
                while not reply.endswith(b"\r\n") or (reply.startswith(b"$") and
                                                      reply.count(b"\r\n") < 2 and
                                                      not reply.startswith(b"$-1")):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
            if not reply.startswith(b"$") or reply.startswith(b"$-1"):
                found.append(None)
            else:
                found.append(reply.split(b"\r\n")[1].decode(errors="replace") or None)
        return found

    def page_script(self, server, op, key, values):
        return 'redis-cli -p "$P%d" %s %s %s' % (server, op.upper(), key, " ".join(values))

    def script_setup(self):
        lines = ['URLS=""']
        for i in range(3):
            lines += ['P%d=$(shuf -i 20000-40000 -n 1)' % i,
                      'mkdir -p "$T/%d" && redis-server --port "$P%d" --bind 127.0.0.1 --save "" '
                      '--appendonly no --daemonize yes --pidfile "$T/%d/pid" --dir "$T/%d" '
                      '>/dev/null' % (i, i, i, i),
                      'until redis-cli -p "$P%d" ping >/dev/null 2>&1; do sleep 0.05; done' % i,
                      'URLS="$URLS -u redis://127.0.0.1:$P%d"' % i]
        lines.append('trap \'for i in 0 1 2; do kill "$(cat "$T/$i/pid")"; done\' EXIT')
        return lines

    def stop(self):
        for server in self.servers:
            server.stop()
        super().stop()


BACKENDS = {"embedded": Embedded, "redis": Redis, "cluster": Cluster, "quorum": Quorum,
            "etcd": Etcd}
