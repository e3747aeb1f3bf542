"""The checker: reads a scenario's history after the run and counts what matters.

A section is one job's life under the lock: from its first fenced write ("start") to
its "end" record, or, for a job killed by SIGKILL, to its last fenced write (at most
one job tick early). Sections are compared only with sections of the same lock.

Sections have a kind (job.py's --kind): exclusive, shared or slots of N (with the slot
NXLOCK_SLOT named). Shared sections may overlap each other, and slot sections each other,
at most N at once in distinct slots; nothing else may overlap.

- overlaps: pairs of sections of distinct jobs whose [start, end] intervals intersect,
  where one is exclusive or their kinds differ;
- slot excess: moments where more than N slot sections ran at once, or two in one slot
  (each counted once per section that made it so, as an overlap);
- fenced violations: the sections (holders) that broke a fencing rule, each counted
  once however many rules it broke:
  * its token is not above the token of a section that ended before it started
    (whatever the kinds: tokens follow the order of the holds),
  * its token was already issued to an earlier section,
  * it overlaps an earlier section and both had a write accepted inside the overlap,
  * it got no token at all;
- stopped: nxlock runs that exited 79; hangs: runs the client had to kill.

An allowance (seconds) leaves out of `overlaps` the overlaps no longer than it, counted
as `brief_overlaps` instead: where a hold is taken away before its expiry (a DEL of an
etcd holder's key, a revoked lease), the holder learns it at its next renewal, within
a third of the ttl (docs/DESIGN.md, guarantee 3), while the next holder starts at once.
"""
import collections


def sections_of(records):
    """Section id -> {"lock", "client", "fence", "start", "end", "writes": [(t, ok)]}."""
    sections = {}
    for r in records:
        if r.get("ev") not in ("start", "write", "end"):
            continue
        s = sections.setdefault(r["section"], {
            "section": r["section"], "lock": r["lock"], "client": r["client"],
            "pid": r["pid"], "fence": r.get("fence"), "start": None, "end": None,
            "last": None, "writes": [], "kind": r.get("kind", "exclusive"),
            "slots": r.get("slots"), "slot": r.get("slot")})
        if r["ev"] == "start":
            s["start"] = r["t"]
        if r["ev"] in ("start", "write"):
            s["writes"].append((r["t"], r["ok"]))
            s["last"] = r["t"] if s["last"] is None else max(s["last"], r["t"])
        if r["ev"] == "end":
            s["end"] = r["t"]
            s["why"] = r.get("why")
    for s in sections.values():
        if s["start"] is None:  # cannot happen: the start is the first record a job writes
            s["start"] = min(t for t, _ in s["writes"]) if s["writes"] else s["end"]
        if s["end"] is None:
            s["end"] = s["last"] if s["last"] is not None else s["start"]
            s["why"] = "killed"
    return sections


def may_overlap(a, b):
    """Two shared sections may run at once, and two slot sections of distinct slots."""
    if a["kind"] != b["kind"] or a["kind"] == "exclusive":
        return False
    if a["kind"] == "slots":
        return a["slot"] is not None and a["slot"] != b["slot"]
    return True


def slot_excess(group):
    """The slot sections that started while N (their --slots) others ran."""
    found = []
    slot_sections = sorted((s for s in group if s["kind"] == "slots"), key=lambda s: s["start"])
    for i, s in enumerate(slot_sections):
        running = [o for o in slot_sections[:i] if o["end"] >= s["start"]]
        if s["slots"] is not None and len(running) >= s["slots"]:
            found.append((s, running))
    return found


def _accepted_within(section, begin, end):
    return any(ok and begin <= t <= end for t, ok in section["writes"])


def check(records, allowance=0.0):
    """The counts for one scenario's history, and examples of what was found; overlaps
    of `allowance` seconds or less are counted apart, as brief_overlaps."""
    sections = sections_of(records)
    by_lock = collections.defaultdict(list)
    for s in sections.values():
        by_lock[s["lock"]].append(s)
    overlaps, brief, examples = 0, 0, []
    violating = set()  # ids of the sections that broke a fencing rule: each counted once

    def violation(section, text):
        if section["section"] not in violating:
            violating.add(section["section"])
            examples.append(text)

    for lock, group in by_lock.items():
        group.sort(key=lambda s: s["start"])
        issued = {}  # token -> the first section that had it
        for s in group:
            if s["fence"] is None:
                violation(s, "%s: %s (pid %d) ran without a token" % (lock, s["client"], s["pid"]))
                continue
            # Successive holders: the later one started after the earlier ended. Of
            # two that overlap (data loss), the one whose job started first may have
            # taken the lock second, after a slower job start: there the overlap
            # rule below, not the order of their tokens, is what fencing promises.
            # Two that may hold at once (shared, or slots of distinct slots) are not
            # successive: the one with the lower token may have taken first and
            # started its job after the other's job ended.
            earlier = [e for e in group if e["fence"] is not None and e["end"] < s["start"]
                       and not may_overlap(e, s)]
            if earlier:
                before = max(earlier, key=lambda e: e["fence"])
                if s["fence"] <= before["fence"]:
                    violation(s, "%s: token went from %d (%s, pid %d) to %d (%s, pid %d)"
                              % (lock, before["fence"], before["client"], before["pid"],
                                 s["fence"], s["client"], s["pid"]))
            if s["fence"] in issued:
                first = issued[s["fence"]]
                violation(s, "%s: token %d issued to two holders (%s pid %d, %s pid %d)"
                          % (lock, s["fence"], first["client"], first["pid"], s["client"],
                             s["pid"]))
            issued.setdefault(s["fence"], s)
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if b["start"] > a["end"]:
                    break  # sorted by start: no later section can overlap a either
                if may_overlap(a, b):
                    continue
                begin, end = b["start"], min(a["end"], b["end"])
                if end - begin <= allowance:
                    brief += 1
                else:
                    overlaps += 1
                    examples.append("%s: overlap %.3f s: %s (pid %d, token %s, %s) and %s "
                                    "(pid %d, token %s)%s" % (
                                        lock, end - begin, a["client"], a["pid"], a["fence"],
                                        a["why"], b["client"], b["pid"], b["fence"],
                                        "" if a["kind"] == b["kind"] == "exclusive" else
                                        ", kinds %s and %s" % (a["kind"], b["kind"])))
                if _accepted_within(a, begin, end) and _accepted_within(b, begin, end):
                    violation(b, "%s: both %s (token %s) and %s (token %s) had writes accepted "
                              "inside their overlap" % (lock, a["client"], a["fence"],
                                                        b["client"], b["fence"]))
        for s, running in slot_excess(group):
            overlaps += 1
            examples.append("%s: %s (pid %d, slot %s) started while %d slot sections of %d ran "
                            "(slots %s)" % (lock, s["client"], s["pid"], s["slot"], len(running),
                                            s["slots"], [o["slot"] for o in running]))
    runs = [r for r in records if r.get("ev") == "run"]
    statuses = collections.Counter(r["status"] for r in runs)
    return {
        "sections": len(sections),
        "overlaps": overlaps,
        "brief_overlaps": brief,
        "fenced_violations": len(violating),
        "stopped": statuses.get(79, 0),
        "hangs": sum(1 for r in runs if r.get("hang")),
        "statuses": dict(sorted(statuses.items(), key=lambda kv: str(kv[0]))),
        "examples": examples,
    }
