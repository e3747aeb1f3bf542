# The shell completions, exercised in real bash, fish and zsh (python3 standard library only).
#
# bash: bash_completion and completions/nxlock.bash are sourced and _nxlock is
#   called with COMP_WORDS/COMP_CWORD/COMP_LINE set as bash itself sets them
#   (split at ':' and '=' too, as COMP_WORDBREAKS says); COMPREPLY is the answer.
# fish: `complete -C LINE` after sourcing completions/nxlock.fish.
# zsh: a live interactive zsh on a pty, see zsh_driver.py.
# Besides fixed cases, every command and option the built binary reports
# (NXLOCK_BIN) must be offered by all three shells.
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


def bash_complete(line):
    result = support.run(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                          support.BASH_COMPLETION, line])
    if result.returncode != 0:
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
        self.assertOffers("nxlock ", self.cli.commands, exactly=True)
        self.assertOffers("nxlock r", ["renew", "run-locked"], exactly=True)
        # after global options too
        self.assertOffers("nxlock --json -u redis://h:6379 s", ["setnx", "status"], exactly=True)

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
        self.assertOffers("nxlock -", self.cli.global_options)
        for command, options in self.cli.command_options.items():
            with self.subTest(command=command):
                self.assertOffers(f"nxlock {command} -",
                                  set(options) | set(self.cli.global_options) - {"--version"})


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


class FishTest(Cases, support.TempDirCase):
    cli = None

    @classmethod
    def setUpClass(cls):
        cls.cli = support.Cli()

    def complete(self, line):
        return fish_complete(line)


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
