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


class OneSeam(unittest.TestCase):
    """cli/ reaches the backends through two doors alone: lock/lock_space.hpp
    for locks, store/make_store.hpp for a key's value and doctor's checks
    (docs/DESIGN.md, "Adding a backend"). It names no backend, and never asks
    which one it has."""

    BACKEND_HEADERS = re.compile(
        r'\s*#\s*include\s*"(store/(etcd|redis|file|net)/|lock/quorum/|lock/etcd_)')

    def test_cli_includes_no_backend_header(self):
        found = []
        for path, text in sources():
            if path.split(os.sep)[0] != "cli":
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if self.BACKEND_HEADERS.match(line):
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])

    def test_cli_never_asks_which_backend_it_has(self):
        found = []
        for path, text in sources():
            if path.split(os.sep)[0] != "cli":
                continue
            for number, line in enumerate(text.splitlines(), 1):
                code = line.split("//", 1)[0]
                if "dynamic_cast" in code or "typeid" in code:
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])


class EtcdWire(unittest.TestCase):
    """etcd's v3 API is spoken in store/etcd alone (docs/DESIGN.md, "The layers"):
    the lock recipe calls its typed client (etcd_kv.hpp), never a /v3/ path, nor
    the gateway's JSON helpers."""

    def test_etcd_paths_and_json_stay_in_store_etcd(self):
        found = []
        for path, text in sources():
            if path.startswith(os.path.join("store", "etcd") + os.sep):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                code = line.split("//", 1)[0]
                if '"/v3/' in code or "store/etcd/etcd_json.hpp" in code:
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])


class KeyNames(unittest.TestCase):
    """A lock's companion keys are named in store/keys alone (holder_key(),
    queue_key(), ...): a name spelled out elsewhere drifts from it."""

    def test_companion_keys_are_spelled_only_in_store_keys(self):
        found = []
        for path, text in sources():
            if path.startswith(os.path.join("store", "keys.")):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if re.search(r'companion_key\([^)]*"', line.split("//", 1)[0]):
                    found.append("%s:%d: %s" % (path, number, line.strip()))
        self.assertEqual(found, [])


ROOT = os.path.normpath(os.path.join(SRC, ".."))


class Citations(unittest.TestCase):
    """Comments, tests and docs cite only what the repository holds: a document
    they name (*.md) exists in it, and none names an issue number."""

    FOLDERS = ("src", "tests", "docs", "scripts", "bench", "fuzz", "man", "completions")

    def files(self):
        for top in self.FOLDERS:
            for folder, _, names in os.walk(os.path.join(ROOT, top)):
                for name in names:
                    if not name.endswith((".patch", ".o", ".a")):
                        yield os.path.join(folder, name)
        for name in ("README.md", "BENCHMARKS.md", "CMakeLists.txt"):
            yield os.path.join(ROOT, name)

    def test_every_document_cited_is_in_the_repository(self):
        held = set()
        for folder, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            held.update(name for name in names if name.endswith(".md"))
        found = []
        for path in self.files():
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (UnicodeDecodeError, FileNotFoundError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                # Documents are named in capitals (DESIGN.md); a lowercase *.md is
                # a file a script writes (bench/'s tables). The man page escapes "-".
                for cited in re.findall(r"\b([A-Z][A-Z0-9_-]*\.md)\b", line.replace("\\-", "-")):
                    if cited not in held:
                        found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, cited))
                if re.search(r"\bissue (#|[0-9])", line, re.IGNORECASE):
                    found.append("%s:%d: names an issue" % (os.path.relpath(path, ROOT), number))
        self.assertEqual(found, [])



class TestCode(unittest.TestCase):
    """Test code never imports a test module (test_*.py): what two need (a deployment, a
    base class, a helper) lives in a module of its own (tests/cli/harness.py,
    deployments.py, faults.py, sentinel_harness.py, etcd_harness.py), so that a test
    module's tests run where it is, once. A test asks the backend fixture for backends
    by what they offer or by name, never by their place in backends(). No test file
    is over 700 lines."""

    def files_of(self, suffixes=(".py", ".cpp", ".hpp")):
        for folder, _, names in os.walk(os.path.join(ROOT, "tests")):
            for name in names:
                if name.endswith(suffixes):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, ROOT), f.read()

    def test_no_backend_is_picked_by_its_position(self):
        found = ["%s:%d" % (path, number) for path, text in self.files_of((".py",))
                 for number, line in enumerate(text.splitlines(), 1)
                 if re.search(r"backends\(\)\[", line)]
        self.assertEqual(found, [])

    def test_no_test_file_is_over_700_lines(self):
        found = ["%s: %d lines" % (path, text.count("\n")) for path, text in self.files_of()
                 if text.count("\n") > 700]
        self.assertEqual(found, [])

    def test_no_test_code_imports_a_test_module(self):
        found = []
        for top in ("tests", "bench", "scripts"):
            for folder, _, names in os.walk(os.path.join(ROOT, top)):
                for name in names:
                    path = os.path.join(folder, name)
                    if not name.endswith(".py") and top != "scripts" and top != "bench":
                        continue
                    try:
                        with open(path, encoding="utf-8") as f:
                            lines = f.read().splitlines()
                    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
                        continue
                    for number, line in enumerate(lines, 1):
                        if re.match(r"\s*(from test_\w+ import|import test_\w+)", line):
                            found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number,
                                                        line.strip()))
        self.assertEqual(found, [])


def code_of(text):
    """`text` without its comments (// to the end of a line, and /* ... */)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.DOTALL)


class StepPolicies(unittest.TestCase):
    """A store step that writes takes its StepPolicy from its caller, always: with a
    default, a step that forgot it would still compile, and write keys that never
    expire (docs/DESIGN.md: nothing piles up)."""

    FOLDERS = ("src", "tests", "fuzz", "bench")

    def files(self):
        for top in self.FOLDERS:
            for folder, _, names in os.walk(os.path.join(ROOT, top)):
                for name in names:
                    if name.endswith((".cpp", ".hpp", ".c", ".h")):
                        path = os.path.join(folder, name)
                        with open(path, encoding="utf-8") as f:
                            yield os.path.relpath(path, ROOT), f.read()

    def test_no_step_policy_parameter_has_a_default(self):
        # The test doubles of tests/unit override the same steps: none has one either.
        found = []
        for path, text in self.files():
            code = code_of(text)
            # A parameter (after "(" or ","), of type StepPolicy however spelled
            # (store::, const, &), named or not, followed by "=".
            pattern = r"[(,]\s*(?:const\s+)?(?:\w+::)*StepPolicy\b\s*(?:const\s*)?&?\s*\w*\s*="
            for match in re.finditer(pattern, code):
                number = code.count("\n", 0, match.end()) + 1
                found.append("%s:%d: %s" % (path, number, " ".join(match.group(0).split())))
        self.assertEqual(found, [])


class FileSizes(unittest.TestCase):
    """No file in src/ is over 400 lines (docs/HACKING.md): one that grows past
    that holds two things, each of which wants a file named for what it is."""

    def test_no_source_file_is_over_400_lines(self):
        found = ["%s: %d lines" % (path, text.count("\n")) for path, text in sources()
                 if text.count("\n") > 400]
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
