# The install layout and the Debian package: `cmake --install`, `cpack -G DEB`, and the .deb's contents.
# (Nothing is installed into this machine's own system: dpkg installs the package
# under a private root with its own package database.)
import glob
import os
import unittest

import support

BUILD_DIR = os.environ.get("NXLOCK_BUILD_DIR") or os.path.join(support.ROOT, "build")

# Paths relative to the install prefix (/usr in the package).
COMMON = [
    "bin/nxlock",
    "share/man/man1/nxlock.1",
    "share/bash-completion/completions/nxlock",
    "share/fish/vendor_completions.d/nxlock.fish",
]
# zsh looks in site-functions on most systems and under /usr/local on Debian,
# but Debian's own zsh reads packaged completions from vendor-completions only.
EXPECTED = COMMON + ["share/zsh/site-functions/_nxlock"]
EXPECTED_IN_DEB = COMMON + ["share/zsh/vendor-completions/_nxlock"]


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, names in os.walk(root) for f in names)


class InstallTest(support.TempDirCase):
    def run_ok(self, args, **kwargs):
        result = support.run(args, **kwargs)
        self.assertEqual(0, result.returncode,
                         f"{' '.join(args)}: exit {result.returncode}\n{result.stdout}{result.stderr}")
        return result

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
        packages = os.path.join(self.tmp, "packages")
        self.run_ok(["cpack", "-G", "DEB", "-B", packages], cwd=BUILD_DIR, timeout=600)
        debs = glob.glob(os.path.join(packages, "*.deb"))
        self.assertEqual(1, len(debs), debs)
        deb = debs[0]

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
