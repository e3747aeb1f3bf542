# Rules about nxlock's own sources that no compiler checks.
import os
import re
import unittest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")


def sources():
    for folder, _, files in os.walk(SRC):
        for name in files:
            if name.endswith((".cpp", ".hpp")):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, SRC), f.read()


class StandardStreams(unittest.TestCase):
    def test_nxlock_writes_through_stdio_not_the_standard_streams(self):
        # cli/cli11.hpp gives CLI11 <iostream>'s declarations without its start-up
        # initialiser, and parse_with_cli11() builds the streams for CLI11 alone:
        # a std::cout anywhere else in nxlock would use them unbuilt.
        found = []
        for path, text in sources():
            for number, line in enumerate(text.splitlines(), 1):
                code = line.split("//", 1)[0]  # comments may name them
                if re.search(r"\bstd::(cout|cerr|clog|cin|wcout|wcerr)\b", code):
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])

    def test_only_cli11_hpp_stands_in_for_iostream(self):
        including = [path for path, text in sources()
                     if re.search(r"#\s*include\s*<(iostream|CLI/CLI\.hpp)>", text)]
        self.assertEqual(including, ["cli/cli11.hpp"])


class Randomness(unittest.TestCase):
    def test_random_bits_come_from_util_random_not_std_random_device(self):
        # std::random_device probes the CPU when constructed (cpuid, a VM exit
        # under a hypervisor), on every lock taken: util::random_u64() uses
        # getrandom(2) (BENCHMARKS.md, "getrandom, not std::random_device").
        found = []
        for path, text in sources():
            for number, line in enumerate(text.splitlines(), 1):
                code = line.split("//", 1)[0]
                if "random_device" in code:
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])


class Layers(unittest.TestCase):
    """Each folder of src/ includes only the layers below it (docs/HACKING.md):
    util/ knows nothing of nxlock; store/ knows util/; lock/ knows store/;
    run/ knows lock/; cli/ knows them all."""

    FORBIDDEN = {
        "util": ("store", "lock", "run", "cli"),
        "store": ("lock", "run", "cli"),
        "lock": ("run", "cli"),
        "run": ("cli",),
    }

    def test_no_folder_includes_a_layer_above_it(self):
        found = []
        for path, text in sources():
            layer = path.split(os.sep)[0]
            for number, line in enumerate(text.splitlines(), 1):
                included = re.match(r'\s*#\s*include\s*"([a-z_]+)/', line)
                if included and included.group(1) in self.FORBIDDEN.get(layer, ()):
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
