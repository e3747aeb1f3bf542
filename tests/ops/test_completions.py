# The shell completions, exercised in real bash, fish and zsh (python3 standard library only).
#
# bash: bash_completion and completions/nxlock.bash are sourced and _nxlock is
#   called with COMP_WORDS/COMP_CWORD/COMP_LINE set as bash itself sets them
#   (split at ':' and '=' too, as COMP_WORDBREAKS says); COMPREPLY is the answer.
# fish: `complete -C LINE` after sourcing completions/nxlock.fish.
# zsh: a live interactive zsh on a pty, see zsh_driver.py.
# Besides fixed cases, every command the built binary reports (NXLOCK_BIN) and
# every option of its option table (`nxlock --dump-options`), with the values of
# those that have a fixed set, must be offered by all three shells, and every
# option that takes a value must be known to take one.
import os
import shutil
import unittest

import support
from zsh_driver import ZshCompleter

BASH_DRIVER = r"""
source /usr/share/bash-completion/bash_completion || exit 90
source "$1" || exit 91
complete -p nxlock || exit 92
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
COMP_WORDS=()
for w in $COMP_LINE; do
    # ':' and '=' are in COMP_WORDBREAKS: bash makes them words of their own.
    while [[ $w =~ ^([^:=]*)([:=]+)(.*)$ ]]; do
        [[ -n ${BASH_REMATCH[1]} ]] && COMP_WORDS+=("${BASH_REMATCH[1]}")
        COMP_WORDS+=("${BASH_REMATCH[2]}")
        w=${BASH_REMATCH[3]}
    done
    [[ -n $w ]] && COMP_WORDS+=("$w")
done
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_nxlock nxlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf 'REPLY:%s\n' "${COMPREPLY[@]}"
"""

MISSING = [s for s in ("bash", "fish", "zsh") if not shutil.which(s)]
if MISSING or not os.path.exists("/usr/share/bash-completion/bash_completion"):
    raise SystemExit("missing " + " ".join(MISSING or ["bash-completion"]) +
                     ": run scripts/install-deps")


# The same, without the bash-completion package: none of its functions defined.
PLAIN_BASH_DRIVER = BASH_DRIVER.replace(
    "source /usr/share/bash-completion/bash_completion || exit 90\n", "")


def bash_complete(line, driver=BASH_DRIVER):
    result = support.run(["bash", "--norc", "--noprofile", "-c", driver, "bash",
                          support.BASH_COMPLETION, line])
    if result.returncode != 0 or (driver is PLAIN_BASH_DRIVER and result.stderr):
        raise AssertionError(f"bash driver failed ({result.returncode}) for {line!r}:\n"
                             f"{result.stdout}{result.stderr}")
    return sorted({l[len("REPLY:"):] for l in result.stdout.splitlines()
                   if l.startswith("REPLY:")} - {""})


def fish_complete(line):
    result = support.run(["fish", "--no-config", "-c", "source $argv[1]; and complete -C $argv[2]",
                          support.FISH_COMPLETION, line])
    if result.returncode != 0 or result.stderr:
        raise AssertionError(f"fish failed ({result.returncode}) for {line!r}:\n{result.stderr}")
    return sorted({l.split("\t")[0] for l in result.stdout.splitlines()} - {""})


class Cases:
    """The same cases for every shell; subclasses provide complete(line)."""

    def assertOffers(self, line, expected, exactly=False):
        got = self.complete(line)
        if exactly:
            self.assertEqual(sorted(set(expected)), got, f"completing {line!r}")
        else:
            missing = sorted(set(expected) - set(got))
            self.assertFalse(missing, f"completing {line!r}: {missing} not offered; got {got}")
        return got

    def test_commands_at_position_1(self):
        self.assertOffers("nxlock ", self.cli.commands + ["help"], exactly=True)
        self.assertOffers("nxlock r", ["renew", "run-locked"], exactly=True)
        # after global options too
        self.assertOffers("nxlock --json -u redis://h:6379 s", ["setnx", "status"], exactly=True)

    def test_help_takes_command_names(self):
        self.assertOffers("nxlock he", ["help"], exactly=True)
        self.assertOffers("nxlock help ", self.cli.commands)
        self.assertOffers("nxlock help lock ru", ["run-locked"], exactly=True)

    def test_on_lost_values(self):
        self.assertOffers("nxlock run-locked --on-lost ", ["term", "kill", "ignore"], exactly=True)
        self.assertOffers("nxlock run-locked -n --on-lost k", ["kill"], exactly=True)

    def test_clock_values(self):
        self.assertOffers("nxlock lock --clock ", ["server", "local"], exactly=True)

    def test_url_schemes(self):
        self.assertOffers("nxlock --url ", ["redis://", "rediss://", "redis+sentinel://", "rediss+sentinel://", "unix://", "file://", "etcd://", "etcds://"],
                          exactly=True)

    def test_password_file_is_a_file(self):
        directory = os.path.join(self.tmp, "secrets")
        os.mkdir(directory)
        open(os.path.join(directory, "redis-password"), "w").close()
        got = self.complete(f"nxlock --password-file {directory}/redis-p")
        self.assertTrue(any(g.endswith("redis-password") for g in got), got)

    def test_lock_options(self):
        got = self.assertOffers("nxlock lock --", ["--ttl", "--nonblock", "--wait",
                                                   "--conflict-exit-code", "--clock", "--json"])
        self.assertNotIn("--on-lost", got)  # run-locked's, not lock's

    def test_child_command_after_key(self):
        for line in ("nxlock run-locked -n KEY tru", "nxlock run-locked -n KEY -- tru",
                     "nxlock -u redis://h:6379 run-locked -t 30 KEY tru",
                     "nxlock run-locked -n --hold 30 KEY tru"):
            got = self.assertOffers(line, ["true"])
            self.assertFalse([g for g in got if not g.startswith("tru")], got)

    def test_child_is_completed_as_its_own_command(self):
        # The child here is nxlock itself, so its completion must take over.
        self.assertOffers("nxlock run-locked KEY nxlock run-locked --on-lost ",
                          ["term", "kill", "ignore"], exactly=True)

    def test_every_option_of_every_command(self):
        self.assertOffers("nxlock -", self.cli.global_options + ["--help", "--version"])
        for command, options in self.cli.command_options.items():
            with self.subTest(command=command):
                self.assertOffers(f"nxlock {command} -",
                                  set(options) | set(self.cli.global_options) - {"--version"})

    def test_every_choice_of_the_table(self):
        choices = [o for o in self.cli.table if o.choices]
        self.assertTrue(choices)  # guards the table's parsing
        for option in choices:
            with self.subTest(command=option.command, option=option.long):
                self.assertOffers(f"nxlock {option.command or ''} {option.long} ".replace("  ", " "),
                                  option.choices, exactly=True)

    def test_every_value_taking_option_is_known_to_take_one(self):
        # The child's command line starts after KEY: the shell must skip each
        # option's value to find KEY, so "VALUE" must not be taken for it.
        for option in self.cli.table:
            if not option.takes_value or option.command not in (None, "run-locked"):
                continue
            for name in option.names:
                with self.subTest(option=name):
                    value = option.choices[0] if option.choices else "1"
                    got = self.complete(f"nxlock run-locked {name} {value} KEY tru")
                    self.assertIn("true", got, f"{name} {value} KEY tru")


class BashTest(Cases, support.TempDirCase):
    cli = None

    @classmethod
    def setUpClass(cls):
        cls.cli = support.Cli()

    def complete(self, line):
        return bash_complete(line)

    def test_registered(self):
        result = support.run(["bash", "--norc", "--noprofile", "-c",
                              'source "$1" && complete -p nxlock', "bash",
                              support.BASH_COMPLETION])
        self.assertEqual("complete -F _nxlock nxlock", result.stdout.strip(), result.stderr)

    def test_without_the_bash_completion_package_completion_is_plain(self):
        # No "_init_completion: command not found" on every TAB: plain words,
        # files and commands (bash_complete fails on anything on stderr).
        def plain(line):
            return bash_complete(line, PLAIN_BASH_DRIVER)
        self.assertEqual(plain("nxlock "), sorted(self.cli.commands + ["help"]))
        self.assertEqual(plain("nxlock run-locked --on-lost "), ["ignore", "kill", "term"])
        self.assertIn("--ttl", plain("nxlock lock --"))
        open(os.path.join(self.tmp, "redis-password"), "w").close()
        self.assertEqual(plain(f"nxlock --password-file {self.tmp}/redis-p"),
                         [f"{self.tmp}/redis-password"])
        self.assertIn("true", plain("nxlock run-locked -n KEY tru"))
        self.assertEqual(plain("nxlock help ru"), ["run-locked"])
        plain("nxlock -u redis://h:6379 ")


class FishTest(Cases, support.TempDirCase):
    cli = None

    @classmethod
    def setUpClass(cls):
        cls.cli = support.Cli()

    def complete(self, line):
        return fish_complete(line)

    def test_a_quorum_is_offered_for_redis_only(self):
        # A repeated etcd URL is 64 (man page, ETCD): its members go in one URL.
        result = support.run(["fish", "--no-config", "-c",
                              "source $argv[1]; and complete -C 'nxlock -u '",
                              support.FISH_COMPLETION])
        described = dict(l.split("\t", 1) for l in result.stdout.splitlines() if "\t" in l)
        self.assertIn("quorum", described["redis://"])
        for scheme in ("etcd://", "etcds://"):
            self.assertNotIn("repeat", described[scheme])
            self.assertIn("one URL", described[scheme])


class ZshTest(Cases, support.TempDirCase):
    cli = None
    zsh = None

    @classmethod
    def setUpClass(cls):
        cls.cli = support.Cli()
        cls.zsh = ZshCompleter(support.COMPLETIONS).__enter__()
        cls.addClassCleanup(cls.zsh.__exit__, None, None, None)

    def complete(self, line):
        return self.zsh.complete(line)


if __name__ == "__main__":
    unittest.main()
