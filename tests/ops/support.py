# Shared helpers of the ops tests: paths, the built binary's commands and option table, temp dirs.
import os
import re
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAN_PAGE = os.path.join(ROOT, "man", "nxlock.1")
COMPLETIONS = os.path.join(ROOT, "completions")
BASH_COMPLETION = os.path.join(COMPLETIONS, "nxlock.bash")
ZSH_COMPLETION = os.path.join(COMPLETIONS, "_nxlock")
FISH_COMPLETION = os.path.join(COMPLETIONS, "nxlock.fish")
EXIT_STATUS_HEADER = os.path.join(ROOT, "src", "cli", "exit_status.hpp")
BIN = os.environ.get("NXLOCK_BIN") or os.path.join(ROOT, "build", "nxlock")

# Options every CLI11 subcommand lists but that belong to the help machinery.
HELP_OPTIONS = {"-h", "--help", "--help-all"}


def run(args, **kwargs):
    kwargs.setdefault("timeout", 120)
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def help_text(*args):
    result = run([BIN, *args, "--help"])
    if result.returncode != 0:
        raise AssertionError(f"{BIN} {' '.join(args)} --help: exit {result.returncode}\n"
                             f"{result.stderr}")
    return result.stdout


def _section(text, title):
    """The lines of a CLI11 help section ("Options:", "Subcommands:"), up to the next one."""
    match = re.search(rf"^{title}:\n(.*?)(?=^\S|\Z)", text, re.M | re.S)
    return match.group(1).splitlines() if match else []


def help_options(text):
    """Every option a CLI11 help text lists, as ["-t", "--ttl", ...]."""
    options = []
    for line in _section(text, "Options"):
        match = re.match(r"^  (-[^\s]+)", line)
        if match:
            options += match.group(1).split(",")
    return options


def help_commands(text):
    return [m.group(1) for line in _section(text, "Subcommands")
            if (m := re.match(r"^  (\S+)", line))]


class TableOption:
    """One line of `nxlock --dump-options`: an option of the table, for one command."""

    def __init__(self, line):
        command, names, self.type_name, self.env, choices, hidden = line.split("\t")
        self.command = None if command == "global" else command
        self.names = names.split(",")
        self.long = self.names[-1]
        self.choices = choices.split()
        # Left out of --help and of what the completions offer (a deprecated
        # name, or one refused with advice); still documented, and known to
        # the completions as taking a value.
        self.hidden = hidden == "hidden"

    @property
    def takes_value(self):
        return self.type_name != ""


def option_table():
    """The option table the binary is built from (src/cli/option_table.cpp), as it prints it."""
    result = run([BIN, "--dump-options"])
    if result.returncode != 0:
        raise AssertionError(f"{BIN} --dump-options: exit {result.returncode}\n{result.stderr}")
    return [TableOption(line) for line in result.stdout.splitlines()]


class Cli:
    """What the built binary has: its commands, and the options of its option table
    (global_options, command_options: every name, short and long), and its --help."""

    def __init__(self):
        self.top_help = help_text()
        self.commands = help_commands(self.top_help)
        self.command_help = {c: help_text(c) for c in self.commands}
        self.help_global_options = help_options(self.top_help)
        self.help_command_options = {c: help_options(t) for c, t in self.command_help.items()}
        self.table = option_table()
        shown = [o for o in self.table if not o.hidden]
        self.global_options = [n for o in shown if o.command is None for n in o.names]
        self.command_options = {c: [n for o in shown if o.command == c for n in o.names]
                                for c in self.commands}


class TempDirCase(unittest.TestCase):
    """Gives each test self.tmp, removed afterwards unless the test failed (then printed)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="nxlock-ops-")
        self.addCleanup(self._cleanup_tmp)

    def _cleanup_tmp(self):
        outcome = getattr(self, "_outcome", None)
        result = getattr(outcome, "result", None)
        problems = list(getattr(result, "errors", [])) + list(getattr(result, "failures", []))
        # A subTest's failure is recorded under the subTest (test_case: this test).
        failed = (any(getattr(test, "test_case", test) is self for test, _ in problems)
                  or not getattr(outcome, "success", True))
        if failed:
            print("\nkept temp dir of failed test:", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
