"""The model's predictions on a quorum of three servers, where a hold lives while a
majority holds it (the man page's QUORUM). A mixin of LockModelMachine."""
import time

import harness
from model import TS, Hold, expiry_of


class QuorumSteps:
    """Each server's value of a key, and what a majority of them decides."""

    def q_expired(self, h):
        return h.value is not None and h.kind != "junk" and expiry_of(h.value) < time.time() - 1

    def q_live(self, k):
        """The hold a majority of the servers hold, if any."""
        for h in k.raw:
            if h is not None and h.kind != "junk" and not self.q_expired(h) and \
                    sum(1 for x in k.raw if x is h) >= 2:
                return h
        return None

    def q_predict_release(self, k, value):
        count = sum(1 for h in k.raw if h is not None and h.value == value)
        hold = next((h for h in k.raw if h is not None and h.value == value), None)
        # What is not a lock on a server holds nothing of ours: it cannot stop a
        # majority of the others, and is the answer (65) only where there is none.
        junk = any(h is not None and h.kind == "junk" for h in k.raw)
        if hold is not None and self.q_expired(hold):
            return ({1, 65} if junk else 1), "", None
        if count >= 2:
            return 0, "", hold
        if count == 1:
            return ({0, 1, 65} if junk else {0, 1}), "", hold
        return ({1, 65} if junk else 1), "", None

    def q_after_release(self, k, hold):
        pass

    def q_page(self, k, server, op, text):
        """A page step on one server of the quorum (redis-cli answers 0 with the reply)."""
        args = [text] if op in ("setnx", "getset") else []
        status, out = self.backend.page(server, op, k.name, *args)
        before = k.raw[server]
        live_before = self.q_live(k)
        if op == "setnx" and before is None or op == "getset":
            if TS.match(text):
                h = next((x for x in k.raw if x is not None and x.page and x.value == text), None)
                h = h or Hold("exclusive", text, page=True)
                h.born = self.steps
            else:
                h = Hold("junk", text, page=True)
            k.raw[server] = h
        elif op == "del":
            k.raw[server] = None
        if live_before is not None and live_before is not self.q_live(k) and live_before.job:
            live_before.job.lost = True

    def q_sync(self, k):
        """Reads each server's value of the key: what the model knows exactly must be
        there; a job's entry is its (renewed) timestamp; what it cannot know is taken."""
        observed = self.backend.raw(k.name)
        # A majority decides an acquisition: the last server's SETNX may land a moment
        # after the job started (a loaded host), so a running job's entry gets a second.
        def settled():
            if any(got is None and h is not None and h.value is None
                   and h.job.process.poll() is None and not h.job.lost
                   for h, got in zip(k.raw, observed)):
                observed[:] = self.backend.raw(k.name)
                return False
            return True
        harness.wait_for(settled, 1)
        for i, (h, got) in enumerate(zip(k.raw, observed)):
            if h is None:
                if got is not None:
                    self.fail("server %d holds %r of %s, the model: nothing" % (i, got, k.name))
            elif h.value is None and h.job.process.poll() is not None:
                # The job has ended: what it left (if anything) is a timestamp that expires.
                same = next((x for x in k.raw if x is not None and x.value == got), None)
                k.raw[i] = None if got is None else (same or Hold("exclusive", got, page=True))
            elif h.value is None:
                if got is None or not TS.match(got):
                    if h.job and h.job.lost:
                        k.raw[i] = None
                        continue
                    self.fail("server %d holds %r of %s, the model: job %d's timestamp"
                              % (i, got, k.name, h.job.number))
            elif got != h.value:
                if self.q_expired(h) and got is None:
                    k.raw[i] = None
                    continue
                self.fail("server %d holds %r of %s, the model: %r" % (i, got, k.name, h.value))
