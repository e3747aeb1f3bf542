"""Prints `module.Class` for every test class of the given test modules, one per
line: tests/CMakeLists.txt registers each as its own ctest entry. A class whose
tests ask the backend fixture for a behaviour (harness.backends(offering=...))
is printed as `module.Class:matrix`: it gets a long entry that runs it over
every backend (NXLOCK_TEST_BACKENDS=all); `:smoke` after that if it has tests
marked @smoke: an entry that runs those on the extra backends."""
import inspect
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ASKS = re.compile(r"\b(offering|lacking)=")


def test_classes(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from test_classes(test)
        else:
            yield type(test)


def source(function):
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def asks_for_backends(cls):
    """True if a test of `cls` asks for backends by behaviour, itself or through a
    helper of its class (such as an override of backends())."""
    helpers = set()
    for klass in cls.__mro__:
        if klass.__module__ in ("harness", "unittest.case", "builtins"):
            continue
        for name, member in vars(klass).items():
            if inspect.isfunction(member) and ASKS.search(source(member)):
                helpers.add(name)
    for name in unittest.TestLoader().getTestCaseNames(cls):
        text = source(getattr(cls, name))
        if ASKS.search(text) or any(re.search(r"\.%s\(" % h, text) for h in helpers):
            return True
    return False


for module in sys.argv[1:]:
    seen = []
    for cls in test_classes(unittest.TestLoader().loadTestsFromName(module)):
        if cls.__name__ == "_FailedTest":
            sys.exit("cannot load %s" % module)
        if cls not in seen:
            seen.append(cls)
            tags = ""
            if asks_for_backends(cls):
                tags = ":matrix"
                if any(getattr(getattr(cls, name), "smoke", False)
                       for name in unittest.TestLoader().getTestCaseNames(cls)):
                    tags += ":smoke"
            print("%s.%s%s" % (module, cls.__name__, tags))
