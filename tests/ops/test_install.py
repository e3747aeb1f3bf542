# The install layout and the Debian package: `cmake --install`, `cpack -G DEB`, the .deb's contents, and lintian on it.
# (Nothing is installed into this machine's own system: dpkg installs the package
# under a private root with its own package database.)
import glob
import gzip
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import unittest

import support

BUILD_DIR = os.environ.get("NXLOCK_BUILD_DIR") or os.path.join(support.ROOT, "build")

# Paths relative to the install prefix (/usr in the package).
COMMON = [
    "bin/nxlock",
    "share/bash-completion/completions/nxlock",
    "share/fish/vendor_completions.d/nxlock.fish",
]
# zsh looks in site-functions on most systems and under /usr/local on Debian,
# but Debian's own zsh reads packaged completions from vendor-completions only.
# The package's man page is compressed, and it has the copyright file and the
# changelog Debian asks of every package (packaging/); `cmake --install` keeps
# the page as it is.
EXPECTED = COMMON + ["share/man/man1/nxlock.1", "share/zsh/site-functions/_nxlock"]
EXPECTED_IN_DEB = COMMON + ["share/man/man1/nxlock.1.gz", "share/zsh/vendor-completions/_nxlock",
                            "share/doc/nxlock/copyright", "share/doc/nxlock/changelog.gz"]


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, names in os.walk(root) for f in names)


class InstallTest(support.TempDirCase):
    _deb = None

    def run_ok(self, args, **kwargs):
        result = support.run(args, **kwargs)
        self.assertEqual(0, result.returncode,
                         f"{' '.join(args)}: exit {result.returncode}\n{result.stdout}{result.stderr}")
        return result

    def deb(self):
        """The .deb `cpack -G DEB` makes of this build, made once for the tests that look into it."""
        cls = type(self)
        if cls._deb is None:
            packages = tempfile.mkdtemp(prefix="nxlock-ops-deb-")
            cls.addClassCleanup(shutil.rmtree, packages, ignore_errors=True)
            self.run_ok(["cpack", "-G", "DEB", "-B", packages], cwd=BUILD_DIR, timeout=600)
            debs = glob.glob(os.path.join(packages, "*.deb"))
            self.assertEqual(1, len(debs), debs)
            cls._deb = debs[0]
        return cls._deb

    def deb_file(self, path):
        """The bytes of ./PATH in the package."""
        tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", self.deb()],
                             capture_output=True, check=True, timeout=120).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            return archive.extractfile("./" + path).read()

    def test_cmake_install_manifest(self):
        prefix = os.path.join(self.tmp, "prefix")
        self.run_ok(["cmake", "--install", BUILD_DIR, "--prefix", prefix])
        installed = files_under(prefix)
        for path in EXPECTED:
            self.assertIn(path, installed)
        self.assertNotIn("share/zsh/vendor-completions/_nxlock", installed)
        self.assertTrue(os.access(os.path.join(prefix, "bin/nxlock"), os.X_OK))
        with open(os.path.join(prefix, "share/man/man1/nxlock.1")) as a, open(support.MAN_PAGE) as b:
            self.assertEqual(b.read(), a.read())

    def test_debian_package(self):
        deb = self.deb()

        # The files, under /usr.
        listing = self.run_ok(["dpkg-deb", "-c", deb]).stdout
        paths = [line.split()[-1] for line in listing.splitlines()]
        for path in EXPECTED_IN_DEB:
            self.assertIn("./usr/" + path, paths)
        self.assertNotIn("./usr/share/zsh/site-functions/_nxlock", paths)

        # The control fields; Depends comes from dpkg-shlibdeps.
        def field(name):
            return self.run_ok(["dpkg-deb", "-f", deb, name]).stdout.strip()

        self.assertEqual("nxlock", field("Package"))
        self.assertEqual("utils", field("Section"))
        # hiredis, like the C++ runtime, is linked in (CMakeLists.txt): one
        # shared object less to load at every start.
        self.assertNotIn("libhiredis", field("Depends"))
        self.assertIn("libc6", field("Depends"))
        # rediss:// dlopens libssl, which dpkg-shlibdeps cannot see: named by hand.
        self.assertIn("libssl3", field("Depends"))
        self.assertTrue(field("Maintainer"))
        self.assertTrue(field("Description"))

        # The dependencies dpkg-shlibdeps named are installed here, so `dpkg -i`
        # on this machine has what it needs...
        for dependency in ("libc6",):
            status = self.run_ok(["dpkg-query", "-W", "-f=${Status}", dependency]).stdout
            self.assertIn("ok installed", status)
        # ...and dpkg installs it. Under a private root with its own, empty package
        # database, which does not list those dependencies: hence --force-depends.
        root = os.path.join(self.tmp, "root")
        for directory in ("info", "updates"):
            os.makedirs(os.path.join(root, "var/lib/dpkg", directory))
        open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
        dpkg = ["dpkg", "--root=" + root, "--force-not-root", "--log=/dev/null"]
        self.run_ok(dpkg + ["--force-depends", "-i", deb])
        self.assertIn("install ok installed", self.run_ok(dpkg + ["-s", "nxlock"]).stdout)

        # `man nxlock` finds and renders the page.
        page = self.run_ok(["man", "-M", os.path.join(root, "usr/share/man"), "nxlock"],
                           env=dict(os.environ, MANPAGER="cat", MANWIDTH="80")).stdout
        self.assertIn("NXLOCK(1)", page)
        self.assertIn("run-locked", page)

        # What it installed runs, and is the binary that was built.
        packaged = self.run_ok([os.path.join(root, "usr/bin/nxlock"), "--version"]).stdout
        built = self.run_ok([support.BIN, "--version"]).stdout
        self.assertTrue(packaged.startswith("nxlock "), packaged)
        self.assertEqual(built, packaged)

        # Its bash completion registers itself where bash-completion will find it.
        completion = os.path.join(root, "usr/share/bash-completion/completions/nxlock")
        result = self.run_ok(["bash", "--norc", "--noprofile", "-c",
                              'source "$1" && complete -p nxlock', "bash", completion])
        self.assertIn("_nxlock", result.stdout)

    def test_lintian_finds_no_error_or_warning(self):
        # Debian's own checker of a package (scripts/install-deps installs it).
        # Its informational tags (I:) may stay; they are printed if it fails.
        args = ["lintian", "--display-info", "--tag-display-limit", "0",
                "--fail-on", "error,warning", self.deb()]
        # Its temporary files in the test's own directory: lintian leaves one behind
        # (mldbm-elf-*), which the run's check of its TMPDIR would find.
        result = support.run(args, timeout=300, env=dict(os.environ, TMPDIR=self.tmp))
        said = result.stdout + result.stderr
        complaints = [line for line in said.splitlines() if re.match(r"[EW]: ", line)]
        self.assertEqual([], complaints, said)
        self.assertEqual(0, result.returncode, f"{' '.join(args)}: exit {result.returncode}\n{said}")

    def test_debian_package_credits_what_it_carries(self):
        # The binary carries, besides nxlock's own code (MIT: LICENSE), what it
        # links statically or compiles from headers (CMakeLists.txt): hiredis,
        # CLI11, nlohmann-json, GCC's C++ runtime and two functions of glibc's libm.
        copyright = self.deb_file("usr/share/doc/nxlock/copyright").decode()
        self.assertTrue(copyright.startswith(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"))
        for work in ("hiredis", "CLI11", "nlohmann-json", "libstdc++", "glibc"):
            self.assertIn(work, copyright)
        licences = set(re.findall(r"(?m)^License: (.+)$", copyright))
        self.assertLessEqual({"Expat", "BSD-3-Clause", "GPL-3+ with GCC-exception-3.1 exception",
                              "LGPL-2.1+"}, licences)
        # Each licence a Files paragraph names has its text: there, or in a
        # stand-alone License paragraph (the format's rule).
        paragraphs = [dict(re.findall(r"(?m)^([\w-]+):(.*(?:\n .*)*)", p))
                      for p in copyright.split("\n\n")]
        standalone = {p["License"].strip().split("\n")[0] for p in paragraphs
                      if "License" in p and "Files" not in p}
        for paragraph in paragraphs:
            if "Files" in paragraph:
                self.assertIn("Copyright", paragraph)
                name, _, text = paragraph["License"].strip().partition("\n")
                self.assertTrue(text or name in standalone, f"no text for {name}")
        # nxlock's own licence is the repository's LICENSE, word for word.
        expat = re.search(r"(?m)^License: Expat\n((?: .*\n?)+)", copyright).group(1)
        expat = " ".join(line.strip() for line in expat.splitlines() if line.strip() != ".")
        with open(os.path.join(support.ROOT, "LICENSE")) as f:
            licence = f.read()
        licence = licence[licence.index("Permission is hereby granted"):]
        self.assertEqual(" ".join(licence.split()), " ".join(expat.split()))

        # The changelog's latest entry is this package's version.
        deb_version = self.run_ok(["dpkg-deb", "-f", self.deb(), "Version"]).stdout.strip()
        changelog = gzip.decompress(self.deb_file("usr/share/doc/nxlock/changelog.gz")).decode()
        self.assertTrue(changelog.startswith(f"nxlock ({deb_version}) "), changelog.splitlines()[0])

        # The man page is the repository's, compressed.
        page = gzip.decompress(self.deb_file("usr/share/man/man1/nxlock.1.gz")).decode()
        with open(support.MAN_PAGE) as f:
            self.assertEqual(f.read(), page)

    def test_install_script_packages_what_was_built(self):
        # README's install command: scripts/install builds the .deb it installs
        # (--deb-only stops there: nothing goes into this machine's system).
        env = dict(os.environ, NXLOCK_BUILD_DIR=BUILD_DIR)
        result = self.run_ok([os.path.join(support.ROOT, "scripts/install"), "--deb-only"],
                             env=env, timeout=600)
        deb = result.stdout.strip().splitlines()[-1]
        self.assertTrue(deb.endswith(".deb") and os.path.isfile(deb), result.stdout)
        self.assertEqual("nxlock", self.run_ok(["dpkg-deb", "-f", deb, "Package"]).stdout.strip())
        # It needs only what building needs, a subset of what the tests need.
        lists = [self.run_ok([os.path.join(support.ROOT, "scripts/install-deps"), "--list", *which])
                 .stdout.split() for which in (["build"], [])]
        self.assertLess(set(lists[0]), set(lists[1]))
        self.assertNotIn("redis-server", lists[0])

    def test_deb_paths_are_where_this_systems_shells_look(self):
        looked_in = {
            "bash": [self.run_ok(["pkg-config", "--variable=completionsdir",
                                  "bash-completion"]).stdout.strip()],
            "fish": self.run_ok(["fish", "-c",
                                 "printf '%s\\n' $fish_complete_path"]).stdout.split(),
            "zsh": self.run_ok(["zsh", "-fc", "print -l $fpath"]).stdout.split(),
        }
        packaged = {"bash": "share/bash-completion/completions",
                    "fish": "share/fish/vendor_completions.d",
                    "zsh": "share/zsh/vendor-completions"}
        for shell, directory in packaged.items():
            with self.subTest(shell=shell):
                self.assertIn("/usr/" + directory, looked_in[shell])
                self.assertTrue(any(p.startswith(directory + "/") for p in EXPECTED_IN_DEB))


if __name__ == "__main__":
    unittest.main()
