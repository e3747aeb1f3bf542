"""etcd:// tokens beside `etcdctl lock`: a holder's token is the revision of a write it made
as its hold began, so tokens rise whichever tool held before (man page, ETCD, Fencing),
and the job gets ETCD_LOCK_KEY and ETCD_LOCK_REV as etcdctl's command does.
"""
import json
import os
import subprocess
import unittest

from etcd_harness import ETCDCTL, HAVE_ETCD, OneMemberTestCase
from harness import dying_with_parent, read, wait_for


# Writes its token (the variable named by $1) and ETCD_LOCK_KEY to the file $2, then
# runs until the file $3 exists.
RECORD = ('echo "$(printenv "$1") ${ETCD_LOCK_KEY:-none}" > "$2"; '
          'while [ ! -e "$3" ]; do sleep 0.05; done')


@unittest.skipUnless(HAVE_ETCD, "etcd is not installed (scripts/install-deps)")
class EtcdTokensTest(OneMemberTestCase):

    def path(self, name):
        return os.path.join(self.tmp, name)

    def nx_holder(self, key, name):
        """run-locked KEY recording $NXLOCK_FENCE in NAME.out until NAME.go exists."""
        process = self.popen("run-locked", key, "sh", "-c", RECORD, "rec", "NXLOCK_FENCE",
                             self.path(name + ".out"), self.path(name + ".go"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(process.stderr.close)
        self.addCleanup(lambda: process.poll() is None and (process.kill(), process.wait()))
        return process

    def ctl_holder(self, key, name):
        """etcdctl lock KEY recording $ETCD_LOCK_REV likewise."""
        process = subprocess.Popen(
            dying_with_parent([ETCDCTL, "--endpoints", self.etcd.endpoints(), "lock", key, "--",
                               "sh", "-c", RECORD, "rec", "ETCD_LOCK_REV",
                               self.path(name + ".out"), self.path(name + ".go")]),
            env=dict(self.env, ETCDCTL_API="3"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: process.poll() is None and (process.kill(), process.wait()))
        return process

    def recorded(self, name):
        self.assertTrue(wait_for(lambda: read(self.path(name + ".out")).strip() != "",
                                 timeout=20), name + " never held the lock")
        token, key = read(self.path(name + ".out")).split()
        return int(token), key

    def release(self, name):
        open(self.path(name + ".go"), "w").close()

    def test_tokens_rise_across_nxlock_and_etcdctl_holders(self):
        # nxlock holds; etcdctl lock queues behind it, then nxlock: each takes the lock in
        # turn. The last one's key was made before etcdctl's hold began.
        a = self.nx_holder("tk", "a")
        token_a, key_a = self.recorded("a")
        b = self.ctl_holder("tk", "b")
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("tk/")) == 2))
        c = self.nx_holder("tk", "c")
        self.assertTrue(wait_for(lambda: len(self.etcd.keys("tk/")) == 3))
        self.release("a")
        self.assertEqual(a.wait(timeout=20), 0, a.stderr.read())
        token_b, _ = self.recorded("b")
        while_b = self.nx("--json", "status", "tk").stdout, self.nx("status", "tk").stdout
        self.release("b")
        self.assertEqual(b.wait(timeout=20), 0)
        token_c, key_c = self.recorded("c")
        self.assertLess(token_a, token_b)
        self.assertLess(token_b, token_c)
        # etcdctl's holder tells its token to its command alone.
        self.assertEqual(json.loads(while_b[0])["fence"], None, while_b[0])
        self.assertIn(b"fence unknown", while_b[1])
        # As etcdctl gives its command: the holder's key, and the token as ETCD_LOCK_REV.
        self.assertEqual(key_a.split("/")[0], "tk")
        self.assertEqual(self.etcd.keys("tk/"), [key_c])
        r = self.nx("--json", "status", "tk")
        self.assertEqual(json.loads(r.stdout)["fence"], token_c, r.stdout)
        self.release("c")
        self.assertEqual(c.wait(timeout=20), 0, c.stderr.read())

    def test_a_mixed_line_of_both_tools_fenced_by_one_file_sees_tokens_rise(self):
        # Six holders queued at once, each tool's in turn; each job appends its token to
        # one file, so the file lists them in hold order.
        fenced = self.path("fenced")
        job = 'echo "$0 $(printenv "$1")" >> "$2"; sleep 0.3'
        procs = []
        for i in range(6):
            if i % 2 == 0:
                procs.append(self.popen("run-locked", "-w", "60", "mix", "sh", "-c", job,
                                        "nxlock", "NXLOCK_FENCE", fenced,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            else:
                procs.append(subprocess.Popen(
                    dying_with_parent([ETCDCTL, "--endpoints", self.etcd.endpoints(), "lock",
                                       "mix", "--", "sh", "-c", job, "etcdctl",
                                       "ETCD_LOCK_REV", fenced]),
                    env=dict(self.env, ETCDCTL_API="3"), stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
            # Each in line before the next: the line alternates the tools.
            self.assertTrue(wait_for(lambda: len(self.etcd.keys("mix/")) == i + 1 or
                                     len(read(fenced).splitlines()) > 0))
        for process in procs:
            self.addCleanup(lambda p=process: p.poll() is None and (p.kill(), p.wait()))
        for process in procs:
            self.assertEqual(process.wait(timeout=30), 0)
        holds = [line.split() for line in read(fenced).splitlines()]
        self.assertEqual(len(holds), 6, holds)
        tokens = [int(token) for _, token in holds]
        self.assertEqual(tokens, sorted(set(tokens)), holds)

    def test_token_in_status_and_list(self):
        r = self.nx("--json", "lock", "-t", "20", "tl")
        self.assertEqual(r.returncode, 0, r.stderr)
        fence = json.loads(r.stdout)["fence"]
        # `lock` leaves its details as it exits: the token is in them.
        status = json.loads(self.nx("--json", "status", "tl").stdout)
        self.assertEqual(status["fence"], fence, status)
        listed = json.loads(self.nx("--json", "list", "tl").stdout)
        self.assertIn(fence, [row.get("fence") for row in listed["locks"]], listed)


if __name__ == "__main__":
    unittest.main()
