"""The stateful model-based test: random steps on a small pool of keys, each run through the
real nxlock binary and compared with what the model (model.py) predicts; the invariants
(one kind at a time, at most N slots, tokens rising across kinds, status and list agreeing)
are checked after every step.
"""
import fnmatch
import json
import os
import shlex
import subprocess
import sys
import time
import types

from hypothesis import reject, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import harness
from etcd_steps import EtcdSteps
from model import (ETCD, JOB_TTL, KEYS, LONG, SHARED, SLOT, TS, Hold, Job, KeyModel, bare,
                   expiry_of, form, lease_of, now)
from observed import StatusChecks
from quorum_steps import QuorumSteps
from recording import pick, recorded
from replace_steps import ReplaceSteps
from script import Script

SHORT = 1          # a hold let to expire: its value is now+2, held 2 s at least
GARBAGE = ["garbage", "12abc", "0x10", "s:1"]
# How many steps a short hold may live before the expiry wait must come (it lives 2 s
# at least; a step costs well under a tenth of that).
SHORT_STEPS = 5


SKIP = set(filter(None, os.environ.get("NXLOCK_MODEL_SKIP", "").split(",")))


class Mismatch(AssertionError):
    pass


class Config:
    backend = None       # a backends.Backend, started once per run
    waits = 1            # expiry waits allowed per example
    header = []
    last_machine = None
    last_failed = None   # the last machine that failed: shrinking's smallest failing run
    steps = 0            # steps run (all examples, shrinking included)
    commands = 0         # nxlock and page commands run
    skipped = {}         # tag -> mismatches NXLOCK_MODEL_SKIP let pass
    seconds = {}         # rule -> seconds spent in it (NXLOCK_MODEL_PROFILE=1 prints them)


def predicted(statuses):
    return set([statuses] if isinstance(statuses, int) else statuses)


class LockModelMachine(StatusChecks, EtcdSteps, QuorumSteps, ReplaceSteps,
                       RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.backend = Config.backend
        self.backend.reset()
        self.keys = {}
        self.jobs = []
        self.job_count = 0
        self.values = []       # every value a lock or renew printed: (key, value)
        self.taken = set()     # values whose holds a page client's write or DEL took away
        self.waits_left = Config.waits
        self.steps = 0
        self.took = set()      # keys a step took a hold on (their token must rise)
        self.leases = {}       # etcd: lease (hex) -> [ttl asked, expiry printed] while alive
        self.script = Script(self.backend, Config.header)
        self.steps_taken = []  # the rules run, as a step list (recorded)
        self.tmp = os.path.join(self.backend.tmp, "jobs")
        os.makedirs(self.tmp, exist_ok=True)
        Config.last_machine = self

    # --- running commands -------------------------------------------------------------

    def nx(self, args, statuses, test="", tag=None):
        """Runs nxlock with `args` (strings; a value as ("value", v) so the script names
        it); fails unless its exit status is one of `statuses`. Returns (status, stdout)."""
        argv, shell = [], []
        for a in args:
            if isinstance(a, tuple):
                argv.append(a[1])
                shell.append(self.script.var(a[1], a[2] if len(a) > 2 else None))
            else:
                argv.append(a)
                shell.append(shlex.quote(a))
        allowed = predicted(statuses)
        self.script.check(allowed, "nx " + " ".join(shell), test)
        Config.commands += 1
        result = subprocess.run([harness.BIN, *self.backend.args(), *argv], capture_output=True,
                                env=self.backend.env(), timeout=harness.COMMAND_TIMEOUT)
        out = result.stdout.decode(errors="replace")
        if result.returncode not in allowed:
            self.fail("nxlock %s: exit %d, the model says %s (stdout %r, stderr %r)"
                      % (" ".join(argv), result.returncode, sorted(allowed), out.strip(),
                         result.stderr.decode(errors="replace").strip()), tag)
        elif test:
            try:
                j = json.loads(out)
            except ValueError:
                self.fail("nxlock %s: no JSON on stdout: %r" % (" ".join(argv), out), tag)
            else:
                # The test is ours; os.environ is the script's printed values, as in its replay.
                scope = {"os": types.SimpleNamespace(environ=self.script.printed)}
                if not eval(test, scope, {"j": j}):  # noqa: S307
                    self.fail("nxlock %s: %s, the model says %s" % (" ".join(argv), out.strip(), test),
                              tag and tag + ":reason")
        return result.returncode, out

    def fail(self, message, tag=None):
        """A mismatch; one whose tag NXLOCK_MODEL_SKIP lists (a rule known to be broken
        until it is fixed) is counted and the run goes on."""
        if tag is not None and any(fnmatch.fnmatch(tag, t) or fnmatch.fnmatch(tag, t + ":*")
                                   for t in SKIP):
            Config.skipped[tag] = Config.skipped.get(tag, 0) + 1
            if os.environ.get("NXLOCK_MODEL_PROFILE"):
                print("skipped mismatch:", tag, message[:300])
            if not tag.startswith(("status:", "kind:", "list:")) and not tag.endswith(":reason"):
                # The model no longer knows the state: drop this example, go on with others.
                reject()
            return
        self.script.raw("# ^ the model checker's complaint: " + message.replace("\n", " "))
        Config.last_failed = self
        raise Mismatch(message)

    def key(self, name):
        return self.keys[name]

    # --- setup ------------------------------------------------------------------------

    @initialize(n1=st.integers(1, 2), n2=st.integers(1, 3))
    @recorded
    def setup_keys(self, n1, n2):
        self.keys = {"k1": KeyModel("k1", n1), "k2": KeyModel("k2", n2)}
        self.script.raw("# --slots: k1 %d, k2 %d" % (n1, n2))

    def timed(self):
        """Charges the time since the last step began to the rule that ran."""
        at = time.monotonic()
        last = getattr(self, "_last", None)
        if last is not None:
            Config.seconds[last[0]] = Config.seconds.get(last[0], 0) + at - last[1]
        self._last = (sys._getframe(2).f_code.co_name, at)

    # --- time ---------------------------------------------------------------------------

    def short_holds(self):
        return [h for k in self.keys.values() for h in self.all_holds(k) if h.short]

    def all_holds(self, k):
        if self.backend.quorum:
            return list({id(h): h for h in k.raw if h is not None}.values())
        return k.holds

    def must_expire(self):
        """A short hold has lived its SHORT_STEPS: the next step is the expiry wait."""
        return any(self.steps - h.born >= SHORT_STEPS for h in self.short_holds())

    def before_step(self, key=None):
        """A step begins: `key` the one it acts on (None: any), whose status the invariant
        checks after it (list covers every key)."""
        self.touched = key
        self.timed()
        self.steps += 1
        Config.steps += 1
        self.took = set()
        # A short hold that lived its SHORT_STEPS, or near its expiry (a slow machine):
        # wait for it now, before a step whose answer would depend on the race.
        if self.must_expire() or any(h.expiry <= time.time() + 0.7 for h in self.short_holds()):
            self.waits_left -= 1
            self.wait_expiry()

    def wait_expiry(self):
        """Sleeps until every short hold has expired by the server's clock (it is expired
        once the second after its timestamp has begun), then forgets them."""
        latest = max(h.expiry for h in self.short_holds())
        # etcd's leader revokes a lapsed lease on its next check (every 0.5 s), and the
        # printed expiry is the grant's second plus the TTL: a second more there.
        slack = 1.0 if self.backend.etcd else 0.0
        seconds = max(0.0, latest + 1.05 + slack - time.time())
        self.script.raw("until_expired %s%s  # every short hold (%.1f s in the run)"
                        % (" ".join(self.script.var(h.value) for h in self.short_holds()),
                           "; sleep 1" if slack else "", seconds))
        # A bound, not a wait on a state: the servers' clocks decide the expiry.
        time.sleep(seconds)
        for lease, (ttl, _) in list(self.leases.items()):
            if ttl == SHORT:
                del self.leases[lease]
        for k in self.keys.values():
            if self.backend.quorum:
                # An expired timestamp stays on the servers, free to take (q_expired).
                for h in k.raw:
                    if h is not None:
                        h.short = False
                continue
            if any(h.short for h in k.holds):
                k.holds = [h for h in k.holds if not h.short]
                if not k.holds:
                    k.stale = True

    # --- rules ----------------------------------------------------------------------------

    @rule()
    @recorded
    def expire(self):
        """Lets every short hold expire (real seconds: the servers decide by their clock).
        (No rule has a precondition: what a rule may do depends on the real answers
        where the model allows several, and hypothesis must replay the same choices.)"""
        if self.waits_left <= 0 or not self.short_holds():
            return
        self.steps += 1
        Config.steps += 1
        self.touched = None
        self.took = set()
        self.waits_left -= 1
        self.wait_expiry()

    @rule(key=st.sampled_from(KEYS), kind=st.sampled_from(["exclusive", "shared", "slots"]),
          short=st.booleans())
    @recorded
    def lock(self, key, kind, short):
        self.before_step(key)
        k = self.key(key)
        short = short and self.waits_left > 0
        args = ["lock", "-n", "-t", str(SHORT if short else LONG)] + self.kind_args(k, kind) + [key]
        outcome = self.predict_take(k, kind)
        status, out = self.nx(args, outcome, tag="lock:%s:%s" % (kind, self.kind_of(k)))
        if status != 0:
            return
        value = out.strip()
        self.script.name(value)
        self.check_printed(k, kind, value)
        hold = Hold(kind, value, short=short, slot=int(value.split(":")[0]) if kind == "slots" else None)
        hold.born = self.steps
        self.add_hold(k, hold)
        self.values.append((key, value))
        if self.backend.etcd:
            self.leases[lease_of(value)] = [SHORT if short else LONG, expiry_of(value)]

    def kind_of(self, k):
        """The key's kind for a mismatch's tag: free, exclusive, shared, slots, page, junk."""
        if self.backend.quorum:
            live = self.q_live(k)
            return "free" if live is None else ("page" if live.page else live.kind)
        if k.garbage is not None:
            return "junk"
        if not k.holds:
            return "free"
        return "page" if k.holds[0].page else k.kind()

    def kind_args(self, k, kind):
        if kind == "shared":
            return ["--shared"]
        if kind == "slots":
            return ["--slots", str(k.n)]
        return []

    def predict_take(self, k, kind):
        """The exit status of a take (-n) of `kind` on key `k`: 0, 75, 64 or 65."""
        if self.backend.etcd:
            # Exclusive holds only on etcd (the man page's ETCD); no page value is a lock.
            return 64 if kind != "exclusive" else (75 if k.holds else 0)
        if self.backend.quorum:
            if kind != "exclusive":
                return 64
            takeable = sum(1 for h in k.raw if h is None or self.q_expired(h))
            junk = any(h is not None and h.kind == "junk" for h in k.raw)
            # What is not a lock cannot be taken, nor stop a majority of the others.
            if takeable >= 2:
                return 0
            return 65 if junk else 75
        if k.garbage is not None:
            return 65
        if not k.holds:
            return 0
        if kind == "exclusive" or k.kind() != kind:
            return 75
        if kind == "slots" and len(k.holds) >= k.n:
            return 75
        return 0

    def check_printed(self, k, kind, value):
        """A printed value has its kind's form; a slot's number is free and at most N."""
        if kind == "exclusive" and self.backend.etcd:
            if not ETCD.match(value):
                self.fail("lock printed %r on etcd, not EXPIRY@LEASE" % value)
        elif kind == "exclusive" and not TS.match(value):
            self.fail("lock printed %r, not a timestamp" % value)
        if kind == "shared" and not SHARED.match(value):
            self.fail("lock --shared printed %r, not EXPIRY:sID" % value)
        if kind == "slots":
            match = SLOT.match(value)
            if not match:
                self.fail("lock --slots printed %r, not SLOT:EXPIRY" % value)
            slot = int(match.group(1))
            if not 1 <= slot <= k.n:
                self.fail("lock --slots %d printed slot %d" % (k.n, slot))
            if slot in [h.slot for h in k.holds]:
                self.fail("lock --slots printed slot %d, which %r holds" % (slot, k.holds))

    def add_hold(self, k, hold):
        k.existed = True
        k.stale = False
        self.took.add(k.name)
        if self.backend.quorum:
            k.raw = [hold if (h is None or self.q_expired(h)) else h for h in k.raw]
        else:
            k.holds.append(hold)

    def drop_hold(self, k, hold, lost=True, taken=False):
        """`hold` is gone; a job's is lost (79 expected), unless it let go itself.
        `taken`: a page client wrote over or deleted the key it held."""
        if taken and hold.value is not None:
            self.taken.add(hold.value)
        if self.backend.quorum:
            k.raw = [None if h is hold else h for h in k.raw]
        elif hold in k.holds:
            k.holds.remove(hold)
        if hold.job is not None and lost:
            hold.job.lost = True

    # --- unlock and renew -------------------------------------------------------------------

    def pick_value(self, data, k, how):
        """A value of form `how` for key `k`: ("value", text[, (printed, expansion)])."""
        own = [h.value for h in self.all_holds(k) if h.value is not None and not h.page
               and h.kind != "junk"]
        printed = [v for _, v in self.values]
        if how == "garbage" or not printed:
            return ("value", data.draw(st.sampled_from(GARBAGE), label="garbage"))
        if how == "own" and own:
            return ("value", pick(data, own, "own"))
        if how == "bare":
            source = pick(data, own or printed, "bare of")
            suffix = {"ts": "", "shared": "%%:*", "slot": "#*:", "etcd": "%%@*"}[form(source)]
            return ("value", bare(source), (source, suffix) if suffix else None)
        return ("value", pick(data, printed, "other"))

    def predict_release(self, k, value, renew=False):
        """(statuses, JSON test, the hold the value names) for unlock/renew KEY VALUE."""
        kind = form(value)
        if kind == "garbage":
            return 64, "", None
        if self.backend.etcd:
            return self.e_predict_release(k, value, renew)
        if self.backend.quorum:
            return self.q_predict_release(k, value)
        if k.garbage is not None:
            # A value past its expiry may be refused as expired before the key is read.
            return (65 if expiry_of(value) >= time.time() - 1 else {1, 65}), "", None
        if k.holds:
            if kind == "ts" and k.kind() in ("shared", "slots"):
                return 64, "", None
            for h in k.holds:
                if h.value == value:
                    return 0, "", h
            if kind == "slot" and int(SLOT.match(value).group(1)) > k.n and k.kind() == "slots":
                return {1, 64}, "", None
            if kind == "ts" and any(h.value is None for h in k.holds):
                # A job's value: now+3 by its last renewal; the same second's bare
                # timestamp is its value too.
                job = next(h for h in k.holds if h.value is None)
                if abs(int(value) - (now() + JOB_TTL + 1)) <= 2:
                    return {0, 1}, "", job
            if value in self.taken:
                return 1, 'j["reason"] in ("held_by_other", "taken_over")', None
            if expiry_of(value) < time.time() - 1:
                # A value past its expiry while another value holds the key: taken_over
                # (the man page's LOCK KINDS) and expired are both true.
                return 1, 'j["reason"] in ("taken_over", "expired")', None
            return 1, 'j["reason"] == "held_by_other"', None
        if not k.existed:
            return 1, 'j["reason"] == "absent"', None
        if value in self.taken:
            # Its hold was taken away by a page client's write: that reason is true.
            return 1, 'j["reason"] in ("expired", "absent", "held_by_other", "taken_over")', None
        if k.stale:
            # The key still holds an expired value that is not this one: LOCK KINDS
            # names no reason for a value that never held it there.
            return 1, 'j["reason"] in ("expired", "absent", "held_by_other", "taken_over")', None
        return 1, 'j["reason"] in ("expired", "absent")', None

    @rule(data=st.data(), key=st.sampled_from(KEYS),
          how=st.sampled_from(["own", "own", "bare", "other", "garbage"]), json_out=st.booleans())
    @recorded
    def unlock(self, data, key, how, json_out):
        self.before_step(key)
        k = self.key(key)
        value = self.pick_value(data, k, how)
        statuses, test, hold = self.predict_release(k, value[1])
        args = (["--json"] if json_out else []) + ["unlock", key, value]
        status, out = self.nx(args, statuses, test if json_out else "",
                              tag="unlock:%s:%s" % (form(value[1]), self.kind_of(k)))
        if status == 0 and hold is not None:
            self.drop_hold(k, hold)
            self.leases.pop(lease_of(hold.value), None)  # etcd: revoked
            if self.backend.quorum:
                self.q_after_release(k, hold)
            elif not k.holds:
                k.stale = False
        elif self.backend.quorum and hold is not None:
            # Released wherever it still was, a majority or not (the man page's QUORUM).
            self.drop_hold(k, hold)

    @rule(data=st.data(), key=st.sampled_from(KEYS),
          how=st.sampled_from(["own", "own", "bare", "other", "garbage"]), json_out=st.booleans())
    @recorded
    def renew(self, data, key, how, json_out):
        self.before_step(key)
        k = self.key(key)
        value = self.pick_value(data, k, how)
        statuses, test, hold = self.predict_release(k, value[1], renew=True)
        if test:
            test = test.replace('j["reason"]', 'j.get("reason")')
        json_out = json_out and 0 not in predicted(statuses)
        args = (["--json"] if json_out else []) + ["renew", "-t", str(LONG), key, value]
        status, out = self.nx(args, statuses, test if json_out else "",
                              tag="renew:%s:%s" % (form(value[1]), self.kind_of(k)))
        if status != 0 and self.backend.quorum and hold is not None:
            # Renewed on a minority, which lets go again (the man page's QUORUM).
            self.drop_hold(k, hold)
        if status != 0 or hold is None:
            return
        new = out.strip()
        if hold.value is None:
            return  # a job's value renewed by hand: the job renews on from it
        if form(new) != form(hold.value):
            self.fail("renew of %r printed %r, another form" % (hold.value, new))
        if hold.kind == "shared" and SHARED.match(new).group(2) != SHARED.match(hold.value).group(2):
            self.fail("renew of %r printed %r, another lease" % (hold.value, new))
        if hold.kind == "slots" and new.split(":")[0] != hold.value.split(":")[0]:
            self.fail("renew of %r printed %r, another slot" % (hold.value, new))
        if self.backend.etcd and lease_of(new) != lease_of(hold.value):
            self.fail("renew of %r printed %r, another lease" % (hold.value, new))
        if not expiry_of(new) >= now() + LONG - 2:
            self.fail("renew -t %d printed %r" % (LONG, new))
        self.script.name(new)
        hold.value = new
        hold.short = False
        self.values.append((key, new))

    @rule(key=st.sampled_from(KEYS), json_out=st.booleans())
    @recorded
    def force(self, key, json_out):
        self.before_step(key)
        k = self.key(key)
        if self.backend.quorum:
            live = self.q_live(k)
            present = any(h is not None for h in k.raw)
            statuses = 0 if live else ({0, 1} if present else 1)
        elif k.holds or k.garbage is not None:
            statuses = 0
        else:
            statuses = {0, 1} if k.stale else 1
        self.nx((["--json"] if json_out else []) + ["unlock", "--force", key], statuses,
                tag="force:%s" % self.kind_of(k))
        for h in list(self.all_holds(k)):
            self.drop_hold(k, h)
        k.holds, k.garbage, k.stale = [], None, False
        k.raw = [None, None, None]

    # --- the page client -------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), op=st.sampled_from(["setnx", "get", "getset", "del"]),
          what=st.sampled_from(["future", "past", "junk"]), server=st.integers(0, 2))
    @recorded
    def page(self, key, op, what, server):
        self.before_step(key)
        k = self.key(key)
        server = server % self.backend.page_targets
        text, shell = {"future": (str(now() + 600), '"$(( $(date +%s) + 600 ))"'),
                       "past": (str(now() - 100), '"$(( $(date +%s) - 100 ))"'),
                       "junk": ("junk-value", "junk-value")}[what]
        values = [text] if op in ("setnx", "getset") else []
        line = self.backend.page_script(server, op, key, [shell] if values else [])
        if self.backend.etcd:
            self.e_page(k, op, text, line, values)
            return
        if self.backend.quorum:
            self.script.raw("out=$(%s); echo \"page: $out\"" % line)
            self.q_page(k, server, op, text)
            return
        statuses, expect_out = self.predict_page(k, op)
        self.script.check(statuses, line)
        tag = "page:%s:%s" % (op, self.kind_of(k))
        status, out = self.backend.page(server, op, key, *values)
        if status not in statuses:
            self.fail("page client %s %s: exit %d, the model says %s (stdout %r)"
                      % (op, key, status, sorted(statuses), out.strip()), tag)
        if op in ("get", "getset") and status == 0:
            got = out.strip()
            if expect_out is not None and got != expect_out:
                self.fail("page client %s %s printed %r, the model says %r" % (op, key, got, expect_out), tag)
            if expect_out is None and k.holds and not TS.match(got):
                self.fail("page client %s %s printed %r: a held key holds a timestamp" % (op, key, got), tag)
        written = op == "getset" or (op == "setnx" and status == 0)
        if written or op == "del":
            for h in list(k.holds):
                self.drop_hold(k, h, taken=True)
            k.holds, k.garbage, k.stale = [], None, False
        if written:
            k.existed = True  # a lock key was made: "absent" is for no lock key and no counter
            if what == "future":
                h = Hold("exclusive", text, page=True)
                h.born = self.steps
                k.holds = [h]
            elif what == "past":
                k.stale = True
            else:
                k.garbage = text

    def predict_page(self, k, op):
        """(statuses, the value get/getset prints or None when only its form is known)."""
        present = bool(k.holds) or k.garbage is not None
        raw = None
        if k.garbage is not None:
            raw = k.garbage
        elif len(k.holds) == 1 and k.holds[0].kind == "exclusive" and k.holds[0].value:
            raw = k.holds[0].value
        if op == "setnx":
            return ({1} if present else ({0, 1} if k.stale else {0})), None
        if op in ("get", "getset", "del"):
            if present:
                return {0}, raw
            return ({0, 1} if k.stale else {1}), None
        raise AssertionError(op)

    # --- run-locked jobs -------------------------------------------------------------------

    def launch_job(self, key, kind, options):
        """Starts `run-locked OPTIONS KEY` on a job that writes its NXLOCK_FENCE and
        NXLOCK_SLOT to its info file and runs until its end file appears, in the
        test and in the replayable script alike; the job, not yet awaited."""
        self.job_count += 1
        number = self.job_count
        end_file = os.path.join(self.tmp, "end%d" % number)
        info_file = os.path.join(self.tmp, "info%d" % number)
        for path in (end_file, info_file):
            if os.path.exists(path):
                os.unlink(path)
        inner = ('echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > %s.tmp && mv %s.tmp %s; '
                 'while [ ! -e %s ]; do sleep 0.1; done') % (info_file, info_file, info_file, end_file)
        args = ["run-locked", *options, key, "sh", "-c", inner]
        shell_inner = inner.replace(self.tmp, "$T")
        self.script.raw("nx %s sh -c %s >/dev/null 2>$T/job%d.err & j%d=$!" % (
            " ".join(shlex.quote(a) for a in args[:-3]), shlex.quote(shell_inner), number, number))
        self.script.jobs.append(number)
        process = subprocess.Popen(harness.dying_with_parent([harness.BIN, *self.backend.args(), *args]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env=self.backend.env())
        job = Job(number, key, kind, process, end_file, info_file)
        self.jobs.append(job)
        return job

    @rule(key=st.sampled_from(KEYS), kind=st.sampled_from(["exclusive", "shared", "slots"]))
    @recorded
    def start_job(self, key, kind):
        if sum(1 for j in self.jobs if j.expect is None) >= 3:
            return  # three at a time at most
        self.before_step(key)
        k = self.key(key)
        job = self.launch_job(key, kind, ["-n", "-t", str(JOB_TTL)] + self.kind_args(k, kind))
        number, end_file, info_file, process = job.number, job.end_file, job.info_file, job.process
        outcome = predicted(self.predict_take(k, kind))
        tag = "lock:%s:%s" % (kind, self.kind_of(k))
        if 0 not in outcome:
            job.expect = outcome
            status = self.wait_exit(job, 5)
            self.script.raw("job_exit %d 5 %s" % (number, shlex.quote(" ".join(map(str, sorted(outcome))))))
            if status not in outcome:
                if status is None:
                    open(end_file, "w").close()
                self.fail("run-locked job %d on %s: exit %s, the model says %s"
                          % (number, key, status, sorted(outcome)), tag)
            return
        started = harness.wait_for(lambda: os.path.exists(info_file) or process.poll() is not None,
                                   10, interval=0.01)
        if not os.path.exists(info_file) and process.poll() is not None:
            if process.returncode in outcome and process.returncode != 0:
                job.expect = {process.returncode}
                return
            self.fail("run-locked job %d on %s exited %d before its job ran; the model "
                      "says it takes the lock (%s)" % (number, key, process.returncode,
                                                       process.stderr.read().decode().strip()), tag)
        if not started:
            self.fail("run-locked job %d on %s did not start in 10 s" % (number, key))
        self.script.raw("until [ -e $T/info%d ]; do sleep 0.05; done" % number)
        fence, slot = open(info_file).read().split()
        hold = Hold(kind, None, job=job, slot=int(slot) if kind == "slots" else None)
        hold.born = self.steps
        hold.token = int(fence) if fence.isdigit() else None
        if hold.token is None:
            self.fail("run-locked job %d got no NXLOCK_FENCE" % number)
        if kind == "slots":
            if not 1 <= hold.slot <= k.n or hold.slot in [h.slot for h in k.holds]:
                self.fail("run-locked --slots %d job got NXLOCK_SLOT=%d; holds: %r"
                          % (k.n, hold.slot, k.holds))
        job.hold = hold
        self.add_hold(k, hold)

    def wait_exit(self, job, seconds):
        try:
            return job.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    @rule(data=st.data())
    @recorded
    def end_job(self, data):
        """Ends a job: a lost one must have stopped at its next renewal (79); a live one ends
        as its job does (0) and lets go."""
        running = [j for j in self.jobs if j.expect is None]
        if not running:
            return
        self.before_step()
        job = pick(data, running, "job")
        self.touched = job.key
        job.expect = {79} if job.lost else {0}
        if job.lost:
            # Its next renewal is at most ttl/3 away: it stops by itself.
            status = self.wait_exit(job, JOB_TTL + 1)
            self.script.raw("job_exit %d %d 79 stops  # at its next renewal, by itself"
                            % (job.number, JOB_TTL + 1))
            if status is None:
                self.fail("job %d lost its hold but still runs %d s later" % (job.number, JOB_TTL + 1),
                          "job:%s:running" % job.kind)
        if not job.lost:
            self.script.raw("touch $T/end%d; job_exit %d 10 0" % (job.number, job.number))
        open(job.end_file, "w").close()
        status = self.wait_exit(job, 10)
        if status not in job.expect:
            self.fail("run-locked job %d on %s: exit %s, the model says %s (stderr %r)"
                      % (job.number, job.key, status, sorted(job.expect),
                         job.process.stderr.read().decode(errors="replace").strip()),
                      "job:%s:%s" % (job.kind, status))
        if not job.lost and job.hold is not None:
            self.drop_hold(self.key(job.key), job.hold, lost=False)
            k = self.key(job.key)
            if not self.backend.quorum and not k.holds:
                k.stale = False

    # --- status and list ---------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS))
    @recorded
    def status(self, key):
        self.before_step(key)
        self.check_status(self.key(key))

    @invariant()
    def agrees(self):
        if not self.keys:
            return
        for job in self.jobs:
            if job.expect is None and not job.lost and job.process.poll() is not None:
                job.expect = {job.process.returncode}
                self.fail("run-locked job %d on %s exited %d by itself; its hold was not taken "
                          "away (stderr %r)" % (job.number, job.key, job.process.returncode,
                                                job.process.stderr.read().decode().strip()),
                          "job:%s:%d" % (job.kind, job.process.returncode))
        listing = None
        for k in self.keys.values():
            if getattr(self, "touched", None) in (None, k.name):
                self.check_status(k)
        if not self.backend.quorum:
            status, out = self.nx(["--json", "list"], {0, 1})
            listing = json.loads(out).get("locks", [])
            for k in self.keys.values():
                self.check_list(k, [e for e in listing if e.get("key") == k.name])
        self.took = set()  # checked: a rule that does nothing next must not count it again




    def teardown(self):
        for job in self.jobs:
            if job.process.poll() is None:
                open(job.end_file, "w").close()
        for job in self.jobs:
            try:
                job.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                job.process.kill()
                job.process.wait()
            if job.process.stderr:
                job.process.stderr.close()
