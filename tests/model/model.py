"""The model of lock kinds (the man page's LOCK KINDS, docs/DESIGN.md): what a key
holds, and what each command on it must answer.

A key holds one exclusive hold, or up to N slot holds, or any number of shared holds;
a page client's future timestamp counts as an exclusive hold, its past one as an expired
lock, anything else as "not a lock" (65). On a quorum the key is three servers' values,
and a hold lives while a majority of them hold it. On etcd a value is EXPIRY@LEASE (the lease
in hex): the lease, not the expiry, names the hold.
"""
import re
import time

LONG = 3600  # seconds: a hold that outlives any run
TS = re.compile(r"^[0-9]+$")
SHARED = re.compile(r"^([0-9]+):(s[0-9a-f]{16})$")
SLOT = re.compile(r"^([0-9]+):([0-9]+)$")
ETCD = re.compile(r"^([0-9]+)@([0-9a-f]+)$")


def form(value):
    """The value form: "ts" (exclusive), "shared", "slot", "etcd" (exclusive, on etcd) or
    "garbage"."""
    if ETCD.match(value):
        return "etcd"
    if TS.match(value):
        return "ts"
    if SHARED.match(value):
        return "shared"
    if SLOT.match(value):
        return "slot"
    return "garbage"


def expiry_of(value):
    """The expiry timestamp a well-formed value carries."""
    kind = form(value)
    if kind == "ts":
        return int(value)
    if kind == "shared":
        return int(SHARED.match(value).group(1))
    if kind == "slot":
        return int(SLOT.match(value).group(2))
    if kind == "etcd":
        return int(ETCD.match(value).group(1))
    return None


def lease_of(value):
    """The lease an etcd value names (hex), or None for another form."""
    match = ETCD.match(value or "")
    return match.group(2) if match else None


def bare(value):
    """The bare timestamp of a value (what `status` used to print)."""
    found = expiry_of(value)
    return None if found is None else str(found)


KEYS = ["k1", "k2"]  # the machine's pool of keys
JOB_TTL = 2          # its run-locked jobs' ttl: they renew every ttl/3


class Hold:
    """One hold. `value` is None for a run-locked job's (its renewals change it)."""

    _ids = 0

    def __init__(self, kind, value=None, short=False, job=None, page=False, slot=None):
        Hold._ids += 1
        self.id = Hold._ids
        self.kind = kind
        self.value = value
        self.short = short
        self.job = job
        self.page = page
        self.slot = slot
        self.token = None

    @property
    def expiry(self):
        return None if self.value is None else expiry_of(self.value)

    def __repr__(self):
        return "Hold(%s %s%s%s)" % (self.kind, self.value or "job",
                                     " short" if self.short else "", " page" if self.page else "")


class Job:
    """A run-locked job in the background: `lost` once the model took its hold away."""

    def __init__(self, number, key, kind, process, end_file, info_file):
        self.number = number
        self.key = key
        self.kind = kind
        self.process = process
        self.end_file = end_file
        self.info_file = info_file
        self.hold = None
        self.lost = False
        self.expect = None  # its predicted exit status once known (75 busy)


class KeyModel:
    def __init__(self, name, slots):
        self.name = name
        self.n = slots
        self.holds = []          # live holds, all of one kind
        self.garbage = None      # a page client's value that is no lock timestamp
        self.stale = False       # the key may still hold an expired timestamp
        self.existed = False     # a lock key or a token counter was ever made
        self.fence = None        # the latest token status reported
        self.raw = [None, None, None]  # quorum: each server's entry (Hold or ("junk", text))

    def kind(self):
        return self.holds[0].kind if self.holds else None

    def live(self):
        return list(self.holds)


def now():
    return int(time.time())
