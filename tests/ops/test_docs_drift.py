# Keeps the man page and the completions in step with the binary: every command that
# `nxlock --help` reports, and every option of the option table the binary is built from
# (`nxlock --dump-options`, src/cli/option_table.cpp), must be documented and completed.
import os
import re
import unittest

import support


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def roff_to_text(source):
    """The man page source with comments and the common roff escapes removed."""
    lines = [l for l in source.splitlines() if not l.startswith('.\\"')]
    text = "\n".join(lines)
    for escape, plain in (("\\-", "-"), ("\\~", " "), ("\\&", ""), ("\\(aq", "'"),
                          ("\\e", "\\")):
        text = text.replace(escape, plain)
    return re.sub(r"\\f[BIRP]", "", text)


def man_sections(text):
    """{".SH title": body} of the man page text."""
    parts = re.split(r'^\.SH\s+"?([^"\n]*)"?\s*$', text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def man_paragraphs(text):
    """The page cut at every structural macro: a .TP tag and its body stay together."""
    return re.split(r"^\.(?:TP|SS|SH|PP|IP|SY)\b.*$", text, flags=re.M)


def names(text, word):
    """True if `word` (an option or command) stands in `text` as a word of its own."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def fish_names(text, option):
    if option.startswith("--"):
        pattern = rf"(?<!\S)-l {re.escape(option[2:])}(?!\S)"
    else:
        pattern = rf"(?<!\S)-s {re.escape(option[1:])}(?!\S)"
    return re.search(pattern, text) is not None


class DocsDriftTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cli = support.Cli()
        cls.man = roff_to_text(read(support.MAN_PAGE))
        cls.sections = man_sections(cls.man)
        cls.completions = {
            "bash": read(support.BASH_COMPLETION),
            "zsh": read(support.ZSH_COMPLETION),
            "fish": read(support.FISH_COMPLETION),
        }

    def all_options(self):
        """(command or None for the global ones, option) for every option of the table,
        hidden ones included."""
        return [(o.command, name) for o in self.cli.table for name in o.names]

    def hidden(self, option):
        return any(option in o.names and o.hidden for o in self.cli.table)

    def test_the_binary_reports_something(self):
        # Guards the parsing of --help below: an empty list would make every check pass.
        self.assertIn("run-locked", self.cli.commands)
        self.assertIn("--url", self.cli.global_options)
        self.assertIn("--ttl", self.cli.command_options["lock"])

    def test_the_app_is_built_from_the_table(self):
        # What --help lists is what the table declares, for every command: an option
        # added to the app by hand, or one of the table left out of it, fails here.
        self.assertEqual(set(self.cli.help_global_options),
                         set(self.cli.global_options) | support.HELP_OPTIONS | {"--version"})
        for command in self.cli.commands:
            with self.subTest(command=command):
                listed = set(self.cli.help_command_options[command]) - support.HELP_OPTIONS
                self.assertEqual(listed - set(self.cli.global_options),
                                 set(self.cli.command_options[command]))
        self.assertNotIn("--dump-options", self.cli.top_help)  # hidden

    def test_man_page_names_every_command(self):
        synopsis = self.sections["SYNOPSIS"]
        commands = self.sections["COMMANDS"]
        json = self.sections["JSON OUTPUT"]
        for command in self.cli.commands:
            with self.subTest(command=command):
                self.assertTrue(names(synopsis, command), f"{command} not in SYNOPSIS")
                self.assertRegex(commands, rf'(?m)^\.SS "?{re.escape(command)}\b',
                                 f"no .SS for {command} in COMMANDS")
                self.assertRegex(json, rf"(?m)^\.B {re.escape(command)}$",
                                 f"{command} not in JSON OUTPUT")

    def test_man_page_names_every_option(self):
        for command, option in self.all_options():
            with self.subTest(command=command, option=option):
                if command is None:
                    self.assertTrue(names(self.sections["GLOBAL OPTIONS"], option),
                                    f"global option {option} not in GLOBAL OPTIONS")
                elif option not in support.HELP_OPTIONS | set(self.cli.global_options):
                    self.assertTrue(names(self.sections["COMMANDS"], option),
                                    f"{command} {option} not in COMMANDS")

    def test_man_page_gives_every_default(self):
        # CLI11 shows defaults as "=VALUE" after the type: "-t,--ttl INT:...=60".
        helps = [self.cli.top_help, *self.cli.command_help.values()]
        checked = []
        for help_text in helps:
            # The option column ends at two spaces (or the line's end); the description follows.
            for match in re.finditer(r"^  (-\S+) ((?:\S| (?! ))*)", help_text, re.M):
                default_match = re.search(r"=(\S+)$", match.group(2))
                if not default_match:
                    continue
                long_option = match.group(1).split(",")[-1]
                default = default_match.group(1)
                checked.append(long_option)
                with self.subTest(option=long_option, default=default):
                    paragraphs = [p for p in man_paragraphs(self.man)
                                  if p.lstrip().startswith((".B", ".BI", ".BR"))
                                  and names(p.split("\n", 2)[1], long_option)]
                    self.assertTrue(paragraphs, f"no .TP entry for {long_option}")
                    self.assertTrue(any(names(p, default) for p in paragraphs),
                                    f"{long_option}: default {default} not in its entry")
        for option in ("--ttl", "--conflict-exit-code", "--clock", "--io-timeout", "--on-lost",
                       "--kill-after"):
            self.assertIn(option, checked)  # guards the parsing above

    def test_man_page_names_every_environment_variable(self):
        variables = {o.env for o in self.cli.table if o.env}
        self.assertIn("NXLOCK_URL", variables)  # guards the table's parsing
        for variable in variables | set(re.findall(r"Env:(\w+)", self.cli.top_help)):
            with self.subTest(variable=variable):
                self.assertTrue(names(self.sections["ENVIRONMENT"], variable))

    def test_man_page_has_every_exit_status(self):
        header = read(support.EXIT_STATUS_HEADER)
        statuses = sorted(set(int(n) for n in re.findall(r"k_exit_\w+\s*=\s*(\d+)", header)))
        self.assertIn(79, statuses)
        section = self.sections["EXIT STATUS"]
        for status in statuses:
            with self.subTest(status=status):
                self.assertRegex(section, rf"(?m)^\.B {status}$")
        for child_status in ("126", "127", "128+N"):
            self.assertTrue(names(section, child_status), child_status)

    def test_readme_has_every_exit_status_the_man_page_has(self):
        # The README's table is a newcomer's; it must not miss one (124 once was).
        man = set(re.findall(r"(?m)^\.B (\d+)$", self.sections["EXIT STATUS"]))
        readme = set(re.findall(r"(?m)^\| (\d+) \|", read(os.path.join(support.ROOT, "README.md"))))
        self.assertIn("124", man)
        self.assertEqual(sorted(man - readme, key=int), [])

    def test_man_page_has_no_groff_warnings(self):
        result = support.run(["groff", "-man", "-ww", "-z", support.MAN_PAGE])
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual("", result.stderr)

    def test_man_page_renders(self):
        result = support.run(["man", "-l", support.MAN_PAGE],
                             env={"MANWIDTH": "80", "MAN_KEEP_FORMATTING": "",
                                  "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("EXIT STATUS", result.stdout)
        too_long = [l for l in result.stdout.splitlines() if len(l) > 80]
        self.assertFalse(too_long, "lines wider than MANWIDTH=80")

    def test_man_page_names_every_choice(self):
        for option in self.cli.table:
            for choice in option.choices:
                with self.subTest(option=option.long, choice=choice):
                    paragraphs = [p for p in man_paragraphs(self.man)
                                  if p.lstrip().startswith((".B", ".BI", ".BR"))
                                  and names(p.split("\n", 2)[1], option.long)]
                    self.assertTrue(any(names(p, choice) for p in paragraphs),
                                    f"{option.long}: {choice} not in its entry")

    def test_completions_name_every_command_and_option(self):
        for shell, text in self.completions.items():
            for command in self.cli.commands:
                with self.subTest(shell=shell, command=command):
                    self.assertTrue(names(text, command))
            for command, option in self.all_options():
                with self.subTest(shell=shell, command=command, option=option):
                    # fish offers what it names with -l; a hidden option is only
                    # listed among those that take a value.
                    found = (fish_names(text, option) if shell == "fish" and not self.hidden(option)
                             else names(text, option))
                    self.assertTrue(found, f"{shell} completion lacks {option}")

    def test_every_command_help_has_an_example(self):
        for command, help_text in self.cli.command_help.items():
            with self.subTest(command=command):
                self.assertRegex(help_text, r"(?m)^Example:\n  .*\bnxlock ")


if __name__ == "__main__":
    unittest.main()
