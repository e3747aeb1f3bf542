"""Prints `module.Class` for every test class of the given test modules, one per
line: tests/CMakeLists.txt registers each as its own ctest entry."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def test_classes(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from test_classes(test)
        else:
            yield type(test)


for module in sys.argv[1:]:
    seen = []
    for cls in test_classes(unittest.TestLoader().loadTestsFromName(module)):
        if cls.__name__ == "_FailedTest":
            sys.exit("cannot load %s" % module)
        if cls not in seen:
            seen.append(cls)
            print("%s.%s" % (module, cls.__name__))
