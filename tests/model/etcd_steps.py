"""The model's predictions on etcd, where a value names its lease and the page steps go to
a plain key the lock leaves alone (the man page's ETCD). A mixin of LockModelMachine."""
import time

from model import LONG, form, lease_of


class EtcdSteps:
    """etcd's answers to unlock and renew, its leases, and the page client's key."""

    def same_value(self, got, value):
        """`got` (status, list) names the hold `value` names: the same text, or on etcd the
        same lease (the expiry is counted again from the TTL left)."""
        if self.backend.etcd:
            return got is not None and lease_of(got) == lease_of(value)
        return got == value

    def e_lease_alive(self, lease):
        """True, False, or None while a short lease may be lapsing (etcd)."""
        info = self.leases.get(lease)
        if info is None:
            return False
        ttl, expiry = info
        if ttl == LONG:
            return True
        if time.time() < expiry - 0.3:
            return True
        return False if time.time() > expiry + 1.6 else None

    def e_predict_release(self, k, value, renew):
        """unlock/renew KEY VALUE on etcd: VALUE names a lease. Only the lease with its key
        under KEY is released or renewed; a lease's TTL cannot change (64); another lock's
        lease is left alone."""
        if form(value) != "etcd":
            return 64, "", None  # a bare timestamp, or another backend's form
        lease = lease_of(value)
        hold = next((h for h in k.holds if h.value is not None and lease_of(h.value) == lease), None)
        alive = self.e_lease_alive(lease)
        if renew:
            if alive is False:
                return 1, 'j["reason"] in ("expired", "absent")', None
            if self.leases[lease][0] != LONG:
                return (64 if alive else {1, 64}), "", None
            if hold is not None:
                return 0, "", hold
            return 1, 'j["reason"] in ("expired", "absent", "held_by_other")', None
        if hold is not None:
            return 0, "", hold
        return 1, 'j["reason"] == "%s"' % ("held_by_other" if k.holds else "expired"), None

    def e_page(self, k, op, text, line, values):
        """A page step on etcd: nxlock's kv command on the plain key KEY, which the lock
        (keys under KEY/) neither reads nor writes: a key/value of its own (k.kv)."""
        kv = getattr(k, "kv", None)
        if op == "setnx":
            statuses, expect = ({0} if kv is None else {1}), None
        elif op in ("get", "getset"):
            statuses, expect = ({0} if kv is not None else {1}), kv
        else:
            statuses, expect = ({0} if kv is not None else {1}), None
        self.script.check(statuses, line)
        tag = "page:%s:etcd" % op
        status, out = self.backend.page(0, op, k.name, *values)
        if status not in statuses:
            self.fail("page client %s %s: exit %d, the model says %s (stdout %r)"
                      % (op, k.name, status, sorted(statuses), out.strip()), tag)
        if op in ("get", "getset") and status == 0 and out.strip() != expect:
            self.fail("page client %s %s printed %r, the model says %r"
                      % (op, k.name, out.strip(), expect), tag)
        if op == "getset" or (op == "setnx" and status == 0):
            k.kv = text
        elif op == "del":
            k.kv = None
