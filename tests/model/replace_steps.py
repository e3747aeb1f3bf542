"""The model's run-locked --replace step (man page, run-locked). A mixin of LockModelMachine."""
import os

from hypothesis import strategies as st
from hypothesis.stateful import rule

import harness
from model import JOB_TTL, KEYS, Hold
from recording import recorded


class ReplaceSteps:
    """--replace of the one exclusive run-locked job holding a key."""

    @rule(key=st.sampled_from(KEYS))
    @recorded
    def replace_job(self, key):
        """run-locked --replace (man page, run-locked): the one exclusive run-locked job
        holding KEY stops (79), then the replacer's job holds, with a higher token; refused
        (64) on a quorum and etcd. KEY in another state (a `lock`, leases, a page value, no
        holder) is the CLI tests' (test_replace.py): the step does nothing then."""
        k = self.key(key)
        if self.backend.quorum or self.backend.etcd:
            self.before_step(key)
            self.nx(["run-locked", "--replace", "-w", "1", key, "true"], 64, tag="replace:refused")
            return
        holding = [j for j in self.jobs if j.expect is None and not j.lost and j.key == key]
        if (k.garbage is not None or len(k.holds) != 1 or len(holding) != 1
                or holding[0].hold is not k.holds[0] or holding[0].kind != "exclusive"):
            return
        old = holding[0]
        self.before_step(key)
        job = self.launch_job(key, "exclusive", ["--replace", "-w", "10", "-t", str(JOB_TTL)])
        number, info_file, process = job.number, job.info_file, job.process
        # The holder stops its job (SIGTERM ends the job's sh) and exits 79, replaced.
        old.expect = {79}
        status = self.wait_exit(old, 10)
        self.script.raw("job_exit %d 10 79 stops  # replaced by job %d" % (old.number, number))
        if status != 79:
            if status is None:
                open(old.end_file, "w").close()
            self.fail("run-locked job %d on %s: exit %s once replaced, the model says 79"
                      % (old.number, key, status), "replace:holder")
        self.drop_hold(k, old.hold, lost=False)
        started = harness.wait_for(lambda: os.path.exists(info_file) or process.poll() is not None,
                                   10, interval=0.01)
        if not started or not os.path.exists(info_file):
            job.expect = {process.poll()}
            self.fail("run-locked --replace job %d on %s did not start its job (exit %s, %r)"
                      % (number, key, process.poll(),
                         process.stderr.read().decode().strip() if process.poll() is not None
                         else ""), "replace:replacer")
        self.script.raw("until [ -e $T/info%d ]; do sleep 0.05; done" % number)
        fence, _ = open(info_file).read().split()
        hold = Hold("exclusive", None, job=job)
        hold.born = self.steps
        hold.token = int(fence) if fence.isdigit() else None
        if hold.token is None or (old.hold.token is not None and hold.token <= old.hold.token):
            self.fail("run-locked --replace job %d got NXLOCK_FENCE %s after job %d's %s"
                      % (number, fence, old.number, old.hold.token), "replace:token")
        job.hold = hold
        self.add_hold(k, hold)
