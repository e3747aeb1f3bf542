"""No silent fallback to the per-host store (man page, ENVIRONMENT and --url): an
empty -u, alone or one of a quorum's, a set but blank NXLOCK_URL and a list with
an empty item ("$A $B $C" with B unset) are refused with 64 before any lock is
taken or job run, naming which; and -v names the backend in use, with its store
path or servers."""
import os

from harness import NxlockTestCase, smoke

UNSET = "an unset variable in a script?"


class EmptyUrls(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def assertRefusedAndNothingRan(self, backend, result, *fragments, env=None):
        """64 naming `fragments`, the job never ran, and the lock is free on `backend`
        and in the per-host store alike."""
        self.assertOneLineError(result, 64, *fragments)
        self.assertFalse(os.path.exists(self.marker), "the job ran")
        for where in (backend.args(), []):
            r = self.nx(*where, "status", "fleetjob", env=env)
            self.assertEqual(r.returncode, 1, r.stderr)  # free: nothing was taken

    def job(self):
        return ["run-locked", "-n", "fleetjob", "touch", self.marker]

    def setUp(self):
        super().setUp()
        self.marker = os.path.join(self.tmp, "ran")

    @smoke
    def test_an_empty_u_alone_or_among_several_is_refused(self):
        for backend in self.backends(offering="lock"):
            cases = [(["-u", ""], ("--url ''", UNSET, "leave -u out")),
                     (["-u", " "], ("--url ' '", UNSET))]
            # One of several: the quorum would shrink to the others (or, for a
            # backend of one URL, become a quorum of it and nothing).
            urls = backend.args()
            n = len(urls) // 2 + 1
            cases += [(urls + ["-u", ""], ("--url ''", "-u %d of %d is empty" % (n, n), UNSET)),
                      (["-u", ""] + urls, ("--url ''", "-u 1 of %d is empty" % n, UNSET))]
            for args, said in cases:
                with self.subTest(backend=backend.name, args=args):
                    r = self.nx(*args, *self.job())
                    self.assertRefusedAndNothingRan(backend, r, *said)
            # Every command: the check comes before any backend is opened.
            for command in (["lock", "k"], ["status", "k"], ["list"], ["doctor"]):
                with self.subTest(backend=backend.name, command=command[0]):
                    self.assertOneLineError(self.nx(*urls, "-u", "", *command), 64, UNSET)

    def test_a_blank_nxlock_url_is_refused(self):
        backend = self.backend_named("file")
        for value in ("", " ", "\t"):
            with self.subTest(value=value):
                env = dict(self.env, NXLOCK_URL=value)
                r = self.nx(*self.job(), env=env)
                self.assertRefusedAndNothingRan(backend, r, "NXLOCK_URL", UNSET,
                                                "unset it for the embedded store")
        # -u wins over it, blank or not.
        r = self.nx(*backend.args(), *self.job(), env=dict(self.env, NXLOCK_URL=""))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_list_with_an_empty_item_is_refused(self):
        a, b = self.redis.url + "/1", self.redis.unix_url + "?db=2"
        redis = self.backend_named("redis")
        # "$A $B $C" with one of them unset, in NXLOCK_URL or in one -u.
        for value, item in ((a + "  " + b, "URL 2 of 3"), (" " + a + " " + b, "URL 1 of 3"),
                            (a + " " + b + " ", "URL 3 of 3"), (a + " ", "URL 2 of 2")):
            with self.subTest(value=value):
                r = self.nx(*self.job(), env=dict(self.env, NXLOCK_URL=value))
                self.assertRefusedAndNothingRan(redis, r, "NXLOCK_URL", item, "is empty", UNSET)
                r = self.nx("-u", value, *self.job())
                self.assertRefusedAndNothingRan(redis, r, "--url", item, "is empty", UNSET)
        # A file's last newline is no item; a path with a space is no list.
        r = self.nx("status", "k", env=dict(self.env, NXLOCK_URL=a + " " + b + "\n"))
        self.assertEqual(r.returncode, 1, r.stderr)
        r = self.nx("status", "k", env=dict(self.env, NXLOCK_URL="file://" + self.tmp + "/a b"))
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_a_u_that_took_the_key_says_so(self):
        for args, command in ((["run-locked", "-u", "k", "touch", self.marker], "run-locked"),
                              (["run-locked", "-u", "k", "true"], "run-locked"),
                              (["lock", "-u", "k"], "lock"), (["-u", "k", "status", "x"], "status")):
            with self.subTest(args=args):
                r = self.nx(*args)
                self.assertOneLineError(r, 64, "-u took 'k' as its URL")
                self.assertNotIn("KEY is required", r.stderr.decode())
                self.assertNotIn("no COMMAND", r.stderr.decode())
                self.assertFalse(os.path.exists(self.marker))
        # The URL left out before the command: -u took the command's name.
        r = self.nx("-u", "run-locked", "k", "touch", self.marker)
        self.assertOneLineError(r, 64, "-u took 'run-locked' as its value")
        self.assertNotIn("'k' is not an nxlock command", r.stderr.decode())
        self.assertFalse(os.path.exists(self.marker))


class VerboseNamesTheBackend(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def backend_line(self, *args, env=None):
        r = self.nx(*args, "-v", "status", "k", env=env)
        lines = [l for l in r.stderr.decode().splitlines() if l.startswith("nxlock: backend: ")]
        self.assertEqual(len(lines), 1, r.stderr)
        return lines[0]

    @smoke
    def test_each_backend_is_named_with_its_servers_or_store(self):
        for backend in self.backends(offering="lock"):
            with self.subTest(backend=backend.name):
                line = self.backend_line(*backend.args())
                for url in backend.urls:
                    shown = url if backend.name != "file" else url[len("file://"):]
                    self.assertIn(shown, line)
                kind = {"file": "the embedded store", "redis": "Redis", "unix": "Redis on the unix",
                        "cluster": "Redis", "sentinel": "through", "quorum": "a quorum of",
                        "etcd": "etcd"}[backend.name]
                self.assertIn(kind, line)

    def test_the_default_store_and_its_source(self):
        line = self.backend_line()
        self.assertIn("the embedded store " + self.store_path + " (NXLOCK_STORE)", line)
        env = dict(self.env, XDG_STATE_HOME=self.tmp)
        env.pop("NXLOCK_STORE")
        line = self.backend_line(env=env)
        # root's is /var/lib/nxlock, whatever XDG_STATE_HOME says.
        default = "/var/lib/nxlock" if os.geteuid() == 0 else os.path.join(self.tmp, "nxlock")
        self.assertIn("the embedded store " + default + " (the default", line)

    def test_a_password_is_not_shown(self):
        line = self.backend_line("-u", "redis://:hunter2@127.0.0.1:%d" % self.redis.port,
                                 "-u", self.redis.url, "-u", self.redis.unix_url)
        self.assertIn("a quorum of 3 servers (a majority is 2)", line)
        self.assertNotIn("hunter2", line)
