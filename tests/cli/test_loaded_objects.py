"""The shared objects nxlock's start loads: every one costs each invocation the
dynamic loader's work (BENCHMARKS.md, "Shared objects loaded at start"). libm was
loaded for one std::ceil in run-locked, and libhiredis is linked from its archive;
this keeps them from coming back unnoticed."""
import subprocess
import unittest

from harness import BIN


def needed(path):
    """The DT_NEEDED entries of the ELF file at `path`."""
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    return [line.split("[", 1)[1].rstrip("]")
            for line in dynamic.splitlines() if "(NEEDED)" in line]


class LoadedObjects(unittest.TestCase):
    def test_no_libm(self):
        libraries = needed(BIN)
        self.assertIn("libc.so.6", libraries)  # the parse found the entries
        if any(name.startswith(("libasan", "libubsan")) for name in libraries):
            self.skipTest("a sanitizer build links the C++ runtime and libm dynamically")
        self.assertFalse([name for name in libraries if name.startswith("libm.")], libraries)

    def test_no_libhiredis(self):
        libraries = needed(BIN)
        self.assertIn("libc.so.6", libraries)
        if any(name.startswith(("libasan", "libubsan")) for name in libraries):
            self.skipTest("a sanitizer build links every library dynamically")
        self.assertFalse([name for name in libraries if name.startswith("libhiredis")], libraries)


if __name__ == "__main__":
    unittest.main()
