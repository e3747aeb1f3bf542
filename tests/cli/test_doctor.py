"""nxlock doctor: one line per check, exit 0 fit / 1 a check failed / 69 unreachable / 77 refused,
--json as one object, and nothing written to the backend it checks."""
import json
import os
import re
import shutil
import socket
import unittest

import deployments
from harness import NxlockTestCase
from sentinel_harness import Deployment

LINE = re.compile(r"^(ok  |warn|FAIL|skip) (\S.*)$")


def closed_ports(count):
    """Loopback ports that were bound, then closed: nothing listens there now."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class DoctorCase(NxlockTestCase):
    def doctor(self, *args, status, env=None):
        """Runs `nxlock ARGS doctor`; asserts the status and the line shape; returns
        {check name: (verdict, rest of the line)} and the text."""
        r = self.nx(*args, "doctor", env=env)
        out = r.stdout.decode()
        self.assertEqual(r.returncode, status, out + r.stderr.decode())
        checks = {}
        for line in out.splitlines():
            match = LINE.match(line)
            self.assertIsNotNone(match, "not a check line: %r" % line)
            name = next((n for n in KNOWN if match.group(2).startswith(n + " ")
                         or match.group(2) == n), match.group(2).split(" ")[0])
            checks[name] = (match.group(1).strip(), match.group(2))
        return checks, out

    def doctor_json(self, *args, status):
        r = self.nx("--json", *args, "doctor")
        self.assertEqual(r.returncode, status, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1, r.stdout)
        out = json.loads(lines[0])
        self.assertEqual(out["exit_status"], status)
        return out


KNOWN = ["reachable", "TLS", "auth", "server version", "maxmemory-policy", "persistence",
         "replication", "failover", "cluster", "clock", "round trip", "INFO", "path", "owner", "mode",
         "free space", "file system", "records"]


class DoctorRedis(DoctorCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def setUp(self):
        super().setUp()
        self.redis.cli("CONFIG", "SET", "maxmemory", "0")
        self.redis.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        self.redis.cli("CONFIG", "SET", "appendonly", "yes")
        self.addCleanup(self.redis.cli, "CONFIG", "SET", "appendonly", "no")

    def test_a_fit_server_passes_every_check(self):
        checks, out = self.doctor("-u", self.redis.url, status=0)
        for name in ("reachable", "auth", "server version", "maxmemory-policy", "persistence",
                     "replication", "clock", "round trip"):
            self.assertIn(name, checks, out)
        self.assertEqual({v for v, _ in checks.values()}, {"ok"}, out)
        self.assertIn("append-only file", checks["persistence"][1])

    def test_the_unix_socket_too(self):
        checks, out = self.doctor("-u", self.redis.unix_url, status=0)
        self.assertIn(self.redis.unix_path, checks["reachable"][1])

    def test_an_evicting_policy_fails_naming_it(self):
        self.redis.cli("CONFIG", "SET", "maxmemory", "100mb")
        self.redis.cli("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        checks, out = self.doctor("-u", self.redis.url, status=1)
        verdict, text = checks["maxmemory-policy"]
        self.assertEqual(verdict, "FAIL", out)
        self.assertIn("allkeys-lru", text)
        self.assertIn("noeviction", text)  # the fix
        self.assertEqual(checks["server version"][0], "ok", out)  # the rest still checked

    def test_no_persistence_is_a_warning(self):
        self.redis.cli("CONFIG", "SET", "appendonly", "no")
        self.redis.cli("CONFIG", "SET", "save", "")
        checks, out = self.doctor("-u", self.redis.url, status=0)
        verdict, text = checks["persistence"]
        self.assertEqual(verdict, "warn", out)
        self.assertIn("restart", text)

    def test_more_replicas_asked_than_there_are_fails(self):
        checks, out = self.doctor("-u", self.redis.url, "--replicas", "1", status=1)
        self.assertEqual(checks["replication"][0], "FAIL", out)
        self.assertIn("--replicas 1", checks["replication"][1])

    def test_a_refusing_password_is_77(self):
        r = self.nx("-u", "redis://:wrong@127.0.0.1:%d" % self.redis.port, "doctor")
        self.assertEqual(r.returncode, 77, r.stderr)
        self.assertIn("FAIL auth", r.stdout.decode())
        self.assertOneLineError(r, 77, "***")
        self.assertNotIn(b"wrong", r.stderr + r.stdout)

    def test_a_port_nothing_listens_on_is_69(self):
        port = closed_ports(1)[0]
        r = self.nx("-u", "redis://127.0.0.1:%d" % port, "doctor")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertRegex(r.stdout.decode(), r"(?m)^FAIL reachable ")
        self.assertOneLineError(r, 69, str(port))

    def test_json_is_one_object_that_matches_the_text(self):
        self.redis.cli("CONFIG", "SET", "appendonly", "no")
        self.redis.cli("CONFIG", "SET", "save", "")
        _, text = self.doctor("-u", self.redis.url, status=0)
        out = self.doctor_json("-u", self.redis.url, status=0)
        self.assertEqual(out["backend"], self.redis.url)
        self.assertIs(out["fit"], True)
        self.assertEqual(len(out["checks"]), len(text.splitlines()))
        for check, line in zip(out["checks"], text.splitlines()):
            self.assertEqual(set(check), {"name", "status", "detail", "advice"})
            self.assertIn(check["status"], ("ok", "warn", "fail"))
            self.assertTrue(line.startswith(check["status"].upper()[:4] if check["status"] == "fail"
                                            else check["status"]), line)
            self.assertIn(check["name"], line)
            if check["name"] not in ("reachable", "clock", "round trip"):  # timings differ
                self.assertIn(check["detail"], line)
            self.assertIn(check["advice"], line)
        self.redis.cli("CONFIG", "SET", "maxmemory", "100mb")
        self.redis.cli("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        out = self.doctor_json("-u", self.redis.url, status=1)
        self.assertIs(out["fit"], False)
        failed = [c for c in out["checks"] if c["status"] == "fail"]
        self.assertEqual([c["name"] for c in failed], ["maxmemory-policy"])
        r = self.nx("--json", "-u", "redis://:wrong@127.0.0.1:%d" % self.redis.port, "doctor")
        self.assertEqual(r.returncode, 77)
        out = json.loads(r.stdout)
        self.assertEqual((out["exit_status"], out["fit"]), (77, False))
        self.assertIn("error", out)

    def test_doctor_writes_nothing(self):
        self.redis.cli("SET", "mine", "1")
        before = (self.redis.cli("DBSIZE"), sorted(self.redis.cli("KEYS", "*").split()))
        for url in (self.redis.url, self.redis.url + "/3", self.redis.unix_url):
            self.doctor("-u", url, status=0)
        after = (self.redis.cli("DBSIZE"), sorted(self.redis.cli("KEYS", "*").split()))
        self.assertEqual(before, after)
        self.assertEqual(self.redis.cli("-n", "3", "DBSIZE").strip(), b"0")

    def test_a_user_without_info_is_warned_not_failed(self):
        self.redis.cli("ACL", "SETUSER", "noinfo", "on", ">pw", "+@all", "-info", "-config", "~*")
        self.addCleanup(self.redis.cli, "ACL", "DELUSER", "noinfo")
        checks, out = self.doctor("-u", "redis://noinfo:pw@127.0.0.1:%d" % self.redis.port,
                                  status=0)
        self.assertEqual(checks["INFO"][0], "warn", out)
        self.assertEqual(checks["auth"][0], "ok", out)

    def test_a_quorum_checks_each_server(self):
        dead = ["redis://127.0.0.1:%d" % port for port in closed_ports(2)]
        urls = [self.redis.url + "/1", self.redis.url + "/2", dead[0]]
        r = self.nx(*[a for u in urls for a in ("-u", u)], "doctor")
        out = r.stdout.decode()
        # Two of three reachable: a majority still locks, so a failed check, not 69.
        self.assertEqual(r.returncode, 1, out + r.stderr.decode())
        for url in urls:
            self.assertIn(url + ": ", out)
        self.assertRegex(out, r"(?m)^FAIL %s: reachable" % re.escape(dead[0]))
        r = self.nx("-u", dead[0], "-u", dead[1], "-u", self.redis.url, "doctor")
        self.assertEqual(r.returncode, 69, r.stdout.decode() + r.stderr.decode())


class DoctorSentinel(DoctorCase):
    @classmethod
    def setUpClass(cls):
        cls.deployment = Deployment()
        cls.addClassCleanup(cls.deployment.stop)

    def test_the_sentinels_and_the_master(self):
        checks, out = self.doctor("-u", self.deployment.url(), status=0)
        sentinel = [l for l in out.splitlines() if " Sentinel 127.0.0.1:" in l]
        self.assertEqual(len(sentinel), 1, out)
        self.assertIn("master 'mymaster' at 127.0.0.1:%d" % self.deployment.master.port,
                      sentinel[0])
        self.assertIn("run at least 3 Sentinels", sentinel[0])  # a lone Sentinel: a warning
        self.assertEqual(checks["replication"][0], "ok", out)
        self.assertIn("1 replica online", checks["replication"][1])
        self.assertEqual(checks["auth"][0], "ok", out)

    def test_a_failover_that_can_split_a_lock_is_a_warning_with_the_two_ways_out(self):
        # No --replicas, and a master that takes writes no replica has: a
        # failover can promote a replica that never saw the lock.
        master = self.deployment.master
        master.cli("CONFIG", "SET", "min-replicas-to-write", "0")
        checks, out = self.doctor("-u", self.deployment.url(), status=0)
        verdict, text = checks["failover"]
        self.assertEqual(verdict, "warn", out)
        self.assertIn("can split a lock in two", text)
        self.assertIn("--replicas 1", text)
        self.assertIn("min-replicas-to-write 1", text)
        # Either way out is ok.
        checks, out = self.doctor("-u", self.deployment.url(), "--replicas", "1", status=0)
        self.assertEqual(checks["failover"][0], "ok", out)
        master.cli("CONFIG", "SET", "min-replicas-to-write", "1")
        self.addCleanup(master.cli, "CONFIG", "SET", "min-replicas-to-write", "0")
        checks, out = self.doctor("-u", self.deployment.url(), status=0)
        self.assertEqual(checks["failover"][0], "ok", out)
        self.assertIn("min-replicas-to-write", checks["failover"][1])
        # A server named directly has no Sentinel to fail it over.
        master.cli("CONFIG", "SET", "min-replicas-to-write", "0")
        checks, out = self.doctor("-u", "redis://127.0.0.1:%d" % master.port, status=0)
        self.assertNotIn("failover", checks)

    def test_an_unknown_master_or_no_sentinel(self):
        url = self.deployment.url().replace("/mymaster", "/nosuchmaster")
        r = self.nx("-u", url, "doctor")
        self.assertEqual(r.returncode, 69, r.stdout.decode() + r.stderr.decode())
        self.assertIn("does not know master 'nosuchmaster'", r.stdout.decode())
        port = closed_ports(1)[0]
        r = self.nx("-u", "redis+sentinel://127.0.0.1:%d/mymaster" % port, "doctor")
        self.assertEqual(r.returncode, 69, r.stdout.decode() + r.stderr.decode())


class DoctorTls(DoctorCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = deployments.Certificates()
        cls.addClassCleanup(shutil.rmtree, cls.certs.dir, True)
        cls.tls = deployments.TlsRedisServer(cls.certs)
        cls.addClassCleanup(cls.tls.stop)

    def test_verified_refused_and_insecure(self):
        url = self.tls.url_for()
        checks, out = self.doctor("-u", url, "--cacert", self.certs.path("ca.crt"), status=0)
        self.assertEqual(checks["TLS"][0], "ok", out)
        self.assertIn("certificate verified", checks["TLS"][1])
        r = self.nx("-u", url, "--cacert", self.certs.path("other-ca.crt"), "doctor")
        self.assertEqual(r.returncode, 77, r.stdout.decode() + r.stderr.decode())
        self.assertRegex(r.stdout.decode(), r"(?m)^FAIL TLS .*--cacert")
        checks, out = self.doctor("-u", url, "--insecure", "-q", status=0)
        self.assertEqual(checks["TLS"][0], "warn", out)
        self.assertIn("--insecure", checks["TLS"][1])


class DoctorCluster(DoctorCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = deployments.Cluster()
        cls.addClassCleanup(cls.cluster.stop)

    def test_cluster_state(self):
        checks, out = self.doctor("-u", self.cluster.url(), status=0)
        self.assertEqual(checks["cluster"][0], "ok", out)
        self.assertIn("cluster_state ok", checks["cluster"][1])


class DoctorStore(DoctorCase):
    def test_a_fit_store(self):
        self.assertEqual(self.nx("lock", "-t", "30", "job").returncode, 0)
        checks, out = self.doctor(status=0)
        for name in ("path", "owner", "mode", "free space", "file system", "records"):
            self.assertEqual(checks[name][0], "ok", out)
        self.assertIn(self.store_path, checks["path"][1])
        self.assertIn("format 2", checks["path"][1])
        self.assertRegex(checks["records"][1], r"records [1-9]")

    def test_a_missing_store_is_reported_not_created(self):
        checks, out = self.doctor(status=0)
        self.assertIn("does not exist yet", checks["path"][1])
        self.assertIn("the first lock creates it", checks["path"][1])
        self.assertFalse(os.path.exists(self.store_path))
        self.assertNotIn("records", checks)  # nothing to count
        self.assertEqual(checks["free space"][0], "ok", out)

    def test_a_world_writable_store_is_a_warning(self):
        self.assertEqual(self.nx("setnx", "k", "v").returncode, 0)
        os.chmod(self.store_path, 0o777)
        checks, out = self.doctor(status=0)
        self.assertEqual(checks["mode"][0], "warn", out)
        self.assertIn("0777", checks["mode"][1])
        self.assertIn("chmod o-w", checks["mode"][1])

    def test_the_default_store_owned_by_another_user_is_77(self):
        # The per-user default (no NXLOCK_STORE), as nobody: its HOME's store is root's.
        home = os.path.join(self.tmp, "home")
        store = os.path.join(home, ".local", "state", "nxlock")
        os.makedirs(store, 0o755)
        os.chmod(store, 0o755)
        env = {k: v for k, v in self.env.items() if k not in ("NXLOCK_STORE", "XDG_STATE_HOME")}
        env["HOME"] = home
        r = self.nx_as_nobody("doctor", env=env)
        self.assertEqual(r.returncode, 77, r.stdout.decode() + r.stderr.decode())
        self.assertRegex(r.stdout.decode(), r"(?m)^FAIL owner root:root, not nobody")

    def test_what_a_user_who_cannot_use_the_store_cannot_check_is_skipped(self):
        # Root's store of 4 records, private (umask 077), checked by nobody.
        old = os.umask(0o077)
        try:
            for key in ("a", "b", "c", "d"):
                self.assertEqual(self.nx("lock", "-t", "300", key).returncode, 0)
        finally:
            os.umask(old)
        for args in ((), ("-u", "file://" + self.store_path)):
            with self.subTest(args=args):
                r = self.nx_as_nobody(*args, "doctor")
                out = r.stdout.decode()
                self.assertEqual(r.returncode, 77, out + r.stderr.decode())
                lines = {LINE.match(l).group(2).split(" ")[0]: l for l in out.splitlines()}
                self.assertRegex(lines["path"], r"^FAIL path .*not readable and writable by nobody")
                # Not "ok owner root:root (shared with nobody)": it is not shared with nobody.
                self.assertRegex(lines["owner"], r"^skip owner root:root")
                self.assertNotIn("shared with", lines["owner"])
                # Not "ok records 0 in the store": they could not be counted.
                self.assertRegex(lines["records"], r"^skip records .*Permission denied")
                self.assertEqual(lines["mode"], "ok   mode 0700")
                r = self.nx_as_nobody(*args, "--json", "doctor")
                statuses = {c["name"]: c["status"] for c in json.loads(r.stdout)["checks"]}
                self.assertEqual((statuses["owner"], statuses["records"]), ("skip", "skip"))

    def test_a_foreign_directory_fails(self):
        os.mkdir(self.store_path)
        with open(os.path.join(self.store_path, "notes.txt"), "w") as f:
            f.write("mine")
        checks, out = self.doctor(status=1)
        self.assertEqual(checks["path"][0], "FAIL", out)
        self.assertIn("not an nxlock store", checks["path"][1])

    def test_doctor_writes_nothing_in_the_store(self):
        for key in ("a", "b", "c"):
            self.assertEqual(self.nx("setnx", key, "v").returncode, 0)
        def snapshot():
            found = {}
            for directory, _, names in os.walk(self.store_path):
                for name in [".", *names]:
                    path = os.path.join(directory, name)
                    found[path] = os.stat(path).st_mtime_ns
            return found
        before = snapshot()
        self.doctor(status=0)
        self.doctor_json(status=0)
        self.assertEqual(before, snapshot())

    def test_json(self):
        out = self.doctor_json("-u", "file://" + self.store_path, status=0)
        self.assertEqual(out["backend"], "file://" + self.store_path)
        self.assertIs(out["fit"], True)
        self.assertEqual(out["checks"][0]["name"], "path")


if __name__ == "__main__":
    unittest.main()
