"""What the parser says: a misspelt option named with the nearest one, a ttl
that is not whole seconds, help for one command (`nxlock help COMMAND`),
usage errors that point at their command's help, and a HOME that is not an
absolute path; and where the JSON object goes (--json-fd)."""
import json
import os
import shutil
import subprocess

from harness import BIN, NxlockTestCase


class ParserMessages(NxlockTestCase):
    def test_unknown_option_names_the_nearest(self):
        for argv, said in ((["lock", "--wiat", "3", "k"], "unknown option --wiat (did you mean --wait?)"),
                           (["run-locked", "--on-lsot", "kill", "k", "true"],
                            "unknown option --on-lsot (did you mean --on-lost?)"),
                           (["--josn", "get", "k"], "unknown option --josn (did you mean --json?)"),
                           (["get", "--prefx=p", "k"], "unknown option --prefx (did you mean --prefix?)"),
                           (["status", "--frobnicate", "k"], "unknown option --frobnicate")):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertOneLineError(r, 64, said)
                self.assertNotIn("not expected", r.stderr.decode())
        self.assertNotIn(b"did you mean", self.nx("status", "--frobnicate", "k").stderr)

    def test_a_word_before_the_command_is_blamed_for_what_it_is(self):
        for argv, said in ((["--urll", "redis://127.0.0.1:1", "status", "kk"],
                            "unknown option --urll (did you mean --url?)"),
                           (["-n", "run-locked", "k", "true"],
                            "-n is an option of lock, run-locked, not a global one: it goes "
                            "after the command name (nxlock run-locked -n ...)"),
                           (["-w", "5", "lock", "k"], "it goes after the command name (nxlock lock -w"),
                           (["--ttl=5", "lock", "k"], "(nxlock lock --ttl ...)"),
                           (["-V"], "unknown option -V (did you mean --version?)"),
                           (["-V", "status", "k"], "unknown option -V (did you mean --version?)"),
                           (["--verison"], "unknown option --verison (did you mean --version?)")):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertOneLineError(r, 64, said, "(see 'nxlock")
                err = r.stderr.decode()
                for wrong in ("is not an nxlock command", "goes after '--'", "not expected"):
                    self.assertNotIn(wrong, err)

    def test_an_unknown_option_is_named_on_one_line(self):
        for argv in ((["--ur\nl", "x"]), (["get", "--pre\nfix", "k"]), (["-\n", "get", "k"])):
            with self.subTest(argv=argv):
                self.assertOneLineError(self.nx(*argv), 64, "\\x0a")

    def test_a_misspelt_command_names_the_nearest(self):
        for word, nearest in (("lcok", "lock"), ("stauts", "status"), ("run-lokced", "run-locked"),
                              ("hlep", "help"), ("unlokc", "unlock")):
            with self.subTest(word=word):
                r = self.nx(word, "k")
                self.assertOneLineError(r, 64, "'%s' is not an nxlock command (did you mean %s?"
                                        % (word, nearest), "commands: ")
        self.assertNotIn(b"did you mean", self.nx("frobnicate", "k").stderr)

    def test_ttl_is_a_whole_number_of_seconds(self):
        for argv in (["lock", "-t", "1.5", "k"], ["lock", "--ttl", "abc", "k"],
                     ["run-locked", "-t", "0", "k", "true"], ["renew", "-t", "2.5", "k", "1"]):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertOneLineError(r, 64, "--ttl", "a whole number of seconds")
                self.assertNotIn("not in range", r.stderr.decode())

    def test_help_command(self):
        for argv, first in ((["help", "run-locked"], "Run COMMAND while holding the lock KEY"),
                            (["help", "lock"], "Take the lock KEY"),
                            (["help"], "nxlock: deadlock-safe locks")):
            with self.subTest(argv=argv):
                r = self.nx(*argv)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(r.stdout.decode().startswith(first), r.stdout)
                self.assertEqual(r.stdout, self.nx(*argv[1:], "--help").stdout)
        self.assertOneLineError(self.nx("help", "frob"), 64, "'frob' is not an nxlock command")

    def test_help_of_several_commands_shows_each(self):
        r = self.nx("help", "lock", "unlock")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.nx("lock", "--help").stdout + b"\n" +
                         self.nx("unlock", "--help").stdout)
        r = self.nx("help", "lock", "frob")
        self.assertOneLineError(r, 64, "'frob' is not an nxlock command")
        self.assertEqual(r.stdout, b"")

    def test_a_command_help_names_the_global_options(self):
        top = self.nx("--help").stdout.decode()
        self.assertIn("(Redis, etcd or an embedded store)", top.splitlines()[0])
        for command in ("lock", "run-locked", "status", "get", "doctor", "list"):
            with self.subTest(command=command):
                text = self.nx(command, "--help").stdout.decode()
                self.assertIn("Global options, before or after the command ('nxlock --help'", text)
                for option in ("-u,--url URL", "--json", "-q,--quiet", "-v,--verbose", "--prefix STRING"):
                    self.assertIn(option, text)

    def test_each_type_name_is_printed_once(self):
        # Not "-c,--command STRING:STRING", "--metrics-dir DIR:DIR".
        for args in (["--help-all"], ["run-locked", "--help"], ["--help"]):
            with self.subTest(args=args):
                text = self.nx(*args).stdout.decode()
                self.assertNotRegex(text, r"\b([A-Z]+):\1\b")
                if args[0] == "run-locked":
                    self.assertRegex(text, r"-c,--command STRING +Run STRING")
                    self.assertRegex(text, r"--metrics-dir DIR \(Env:NXLOCK_METRICS_DIR\)")

    def test_usage_errors_point_at_the_command_help(self):
        for argv, command in ((["run-locked", "-w", "x", "k", "true"], "run-locked"),
                              (["lock", "-n", "-w", "1", "k"], "lock"),
                              (["get"], "get"), (["--io-timeout", "abc", "status", "k"], "status")):
            with self.subTest(argv=argv):
                self.assertOneLineError(self.nx(*argv), 64, f"(see 'nxlock {command} --help')")
        # No command: the top help.
        self.assertOneLineError(self.nx("--bogus"), 64, "(see 'nxlock --help')")

    def test_relative_home(self):
        # root's default store is /var/lib/nxlock, whatever HOME says: ask as
        # an unprivileged user, running a copy from the temp dir (the checkout
        # may sit in a directory only we can enter).
        def drop():
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
        os.chmod(self.tmp, 0o755)
        binary = os.path.join(self.tmp, "nxlock")
        shutil.copy(BIN, binary)
        env = dict(self.env, HOME="relative")
        for name in ("NXLOCK_STORE", "XDG_STATE_HOME"):
            env.pop(name, None)
        r = subprocess.run([binary, "status", "k"], capture_output=True, env=env,
                           preexec_fn=drop, cwd=self.tmp, timeout=30)
        self.assertOneLineError(r, 64, "HOME 'relative' is not an absolute path")
        self.assertNotIn("nor HOME is set", r.stderr.decode())

    def test_list_waiters_is_accepted(self):
        self.assertEqual(self.nx("lock", "k").returncode, 0)
        r = self.nx("list", "--waiters")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"k", r.stdout)
        r = self.nx("--json", "list", "--waiters", "k*")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["exit_status"], 0)


class JsonFd(NxlockTestCase):
    def run_with_fd(self, *args):
        """Runs nxlock with a pipe's write end as a descriptor of its own, given for FD
        in `args`; returns (result, what came on the pipe, the descriptor's number)."""
        read_end, write_end = os.pipe()
        try:
            argv = [str(write_end) if a == "FD" else a.replace("FD", str(write_end)) for a in args]
            process = subprocess.Popen([BIN, *argv], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=self.env, pass_fds=(write_end,))
        finally:
            os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            on_fd = reader.read()  # ends when every holder of the write end is gone
        out, err = process.communicate(timeout=60)
        return subprocess.CompletedProcess(argv, process.returncode, out, err), on_fd, write_end

    def test_the_object_goes_to_the_descriptor(self):
        r, on_fd, _ = self.run_with_fd("--json-fd", "FD", "run-locked", "-n", "k", "sh", "-c",
                                       "echo hi")
        self.assertEqual((r.returncode, r.stdout), (0, b"hi\n"), r.stderr)
        self.assertEqual(json.loads(on_fd)["exit_status"], 0)
        self.assertEqual(len(on_fd.splitlines()), 1)
        r, on_fd, _ = self.run_with_fd("get", "--json-fd=FD", "missing")
        self.assertEqual((r.returncode, r.stdout), (1, b""), r.stderr)
        self.assertEqual(json.loads(on_fd), {"exit_status": 1, "found": False, "key": "missing"})

    def test_the_descriptor_does_not_reach_the_job(self):
        # The job (the shell) lists its own descriptors.
        r, on_fd, fd = self.run_with_fd("--json-fd", "FD", "run-locked", "-n", "k", "sh", "-c",
                                        "ls /proc/$$/fd")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(str(fd), r.stdout.decode().split(), r.stdout)
        self.assertEqual(json.loads(on_fd)["exit_status"], 0)

    def test_stdout_stays_the_default(self):
        r = self.nx("--json", "run-locked", "-n", "k", "true")
        self.assertEqual(json.loads(r.stdout)["exit_status"], 0)

    def test_a_closed_descriptor_is_a_usage_error(self):
        r = self.nx("--json-fd", "9", "get", "k")
        self.assertOneLineError(r, 64, "--json-fd 9", "not open")
        self.assertOneLineError(self.nx("--json-fd", "x", "get", "k"), 64, "--json-fd")
