"""What status and list say of each key, checked against the model: the invariant's half
that reads (machine.py's agrees). A mixin of LockModelMachine."""
import json


class StatusChecks:
    """status --json and list --json, against the holds the machine knows."""

    def check_status(self, k):
        """status --json KEY: held or not, the kind, its holders and their tokens."""
        if self.backend.quorum:
            self.q_sync(k)
            live = self.q_live(k)
            holds = [live] if live else []
            statuses = 0 if live else {1, 65} if any(h and h.kind == "junk" for h in k.raw) else 1
        else:
            holds = k.holds
            statuses = 65 if k.garbage is not None else (0 if holds else 1)
        tag = "status:%s" % self.kind_of(k)
        # What the script checks too: the kind and how many hold (the rest is checked here).
        test = ""
        if holds and holds[0].kind != "exclusive":
            test = 'j.get("kind") == "%s" and j.get("shared_holders") == %d' % (holds[0].kind, len(holds))
        elif holds:
            test = 'j.get("kind") == "exclusive"'
            if holds[0].value is not None and not self.backend.etcd:
                test += ' and j.get("value") == %s' % self.script.py_value(holds[0].value)
        status, out = self.nx(["--json", "status", k.name], statuses, test=test, tag=tag)
        if status not in (0, 1):
            return
        j = json.loads(out)
        if bool(j.get("held")) != bool(holds):
            self.fail("status %s: held %s, the model: %r" % (k.name, j.get("held"), holds), tag)
        fence = j.get("fence")
        if k.name in self.took:
            if fence is None or (k.fence is not None and fence <= k.fence):
                self.fail("status %s: latest token %s after a take; before it: %s"
                          % (k.name, fence, k.fence), tag + ":tokens")
        elif fence != k.fence and k.fence is not None and \
                not (fence is None and all(h.page for h in holds)) and \
                not (self.backend.quorum and fence is not None and fence > k.fence):
            # (A quorum's status gives the highest counter of the servers that answer;
            # servers that issued more than the quorum's token keep it: it may rise.)
            # (The embedded store forgets a free key's latest token: status --json gives
            # null there; a later take's token must still be above it.)
            self.fail("status %s: latest token went from %s to %s with no take"
                      % (k.name, k.fence, fence), tag + ":tokens")
        if not holds:
            if fence is not None:
                k.fence = fence
            return
        kind = holds[0].kind
        if j.get("kind") != kind:
            self.fail("status %s: kind %r, the model: %s held by %r" % (k.name, j.get("kind"), kind, holds),
                      "kind:" + tag)
        if kind == "exclusive":
            h = holds[0]
            # (On etcd the expiry is counted again from the lease's TTL left: the lease
            # names the hold, and differs in a replay, so the script does not check it.)
            if h.value is not None and not self.same_value(j.get("value"), h.value):
                self.fail("status %s: value %r, the model: %r" % (k.name, j.get("value"), h.value), tag)
            if h.token is None and not h.page:
                h.token = fence
            if h.job is not None and h.token is not None and fence != h.token:
                self.fail("status %s: token %s, the job's NXLOCK_FENCE %s" % (k.name, fence, h.token), tag + ":tokens")
        else:
            holders = self.holders_of(j)
            if len(holders) != len(holds):
                self.fail("status %s: %d holders %r, the model: %r" % (k.name, len(holders),
                                                                     holders, holds), tag)
            by_value = {e.get("value"): e for e in holders}
            for h in holds:
                if h.value is not None:
                    if h.value not in by_value:
                        self.fail("status %s: no holder with value %r (holders %r)" % (k.name, h.value, holders), tag)
                        continue
                    token = by_value[h.value].get("fence")
                    if h.token is None:
                        h.token = token
                    elif token != h.token:
                        self.fail("status %s: %r's token went from %s to %s" % (k.name, h.value, h.token, token), tag + ":tokens")
            tokens = [e.get("fence") for e in holders]
            if None in tokens or len(set(tokens)) != len(tokens):
                self.fail("status %s: holders' tokens %r: each hold takes its own" % (k.name, tokens), tag + ":tokens")
            if fence is not None and None not in tokens and tokens and max(tokens) > fence:
                self.fail("status %s: a holder's token %s above the latest %s" % (k.name, max(tokens), fence), tag + ":tokens")
            if kind == "slots":
                slots = [e.get("slot") or int(str(e.get("value", "0:")).split(":")[0] or 0)
                         for e in holders]
                if len(set(slots)) != len(slots) or any(not 1 <= (s or 0) <= k.n for s in slots):
                    self.fail("status %s: slots %r of --slots %d" % (k.name, slots, k.n), tag)
        # A new hold's token is above every token issued before it, whatever the kind.
        for h in holds:
            if h.token is not None and getattr(h, "born", None) == self.steps and k.name in self.took \
                    and k.fence is not None and h.token <= k.fence and h.job is None:
                self.fail("status %s: the new hold's token %s is not above %s" % (k.name, h.token, k.fence), tag + ":tokens")
        if fence is not None:
            k.fence = fence

    def holders_of(self, j):
        """The holders a status --json object lists (shared or slot holders)."""
        for field in ("holders", "shared", "slots"):
            found = j.get(field)
            if isinstance(found, list):
                return [e for e in found if e.get("held", True) and e.get("state") != "free"]
        return []

    def check_list(self, k, entries):
        tag = "list:%s" % self.kind_of(k)
        live = [e for e in entries if e.get("state") != "expired"]
        if k.garbage is not None:
            return
        if len(live) != len(k.holds):
            self.fail("list: %d entries for %s %r, the model: %r" % (len(live), k.name, live, k.holds), tag)
        # A slot's entry may give its value bare beside its "slot".
        values = {e.get("value") for e in live} | {"%s:%s" % (e["slot"], e.get("value"))
                                                  for e in live if e.get("slot") is not None}
        for h in k.holds:
            if h.value is not None and not any(self.same_value(v, h.value) for v in values):
                self.fail("list: no entry of %s with value %r (%r)" % (k.name, h.value, live), tag)
