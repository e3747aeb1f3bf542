"""The checker: reads a scenario's history after the run and counts what matters.

A section is one job's life under the lock: from its first fenced write ("start") to
its "end" record, or, for a job killed by SIGKILL, to its last fenced write (at most
one job tick early). Sections are compared only with sections of the same lock.

- overlaps: pairs of sections of distinct jobs whose [start, end] intervals intersect;
- fenced violations, each counted once:
  * successive holders (by start) whose tokens do not strictly increase,
  * two distinct holders with equal tokens (a pair not already counted as successive),
  * two overlapping holders that both had a write accepted inside their overlap,
  * a holder that got no token at all;
- stopped: nxlock runs that exited 79; hangs: runs the client had to kill.
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
            "last": None, "writes": []})
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


def _accepted_within(section, begin, end):
    return any(ok and begin <= t <= end for t, ok in section["writes"])


def check(records):
    """The counts for one scenario's history, and examples of what was found."""
    sections = sections_of(records)
    by_lock = collections.defaultdict(list)
    for s in sections.values():
        by_lock[s["lock"]].append(s)
    overlaps, violations, examples = 0, 0, []
    for lock, group in by_lock.items():
        group.sort(key=lambda s: s["start"])
        counted_pairs = set()
        for s in group:
            if s["fence"] is None:
                violations += 1
                examples.append("%s: section %s of %s ran without a token"
                                % (lock, s["section"], s["client"]))
        for a, b in zip(group, group[1:]):
            if a["fence"] is not None and b["fence"] is not None and b["fence"] <= a["fence"]:
                violations += 1
                counted_pairs.add((a["section"], b["section"]))
                examples.append("%s: token went from %d (%s, pid %d) to %d (%s, pid %d)"
                                % (lock, a["fence"], a["client"], a["pid"], b["fence"],
                                   b["client"], b["pid"]))
        by_token = collections.defaultdict(list)
        for s in group:
            if s["fence"] is not None:
                by_token[s["fence"]].append(s)
        for token, holders in by_token.items():
            for i, a in enumerate(holders):
                for b in holders[i + 1:]:
                    if (a["section"], b["section"]) not in counted_pairs:
                        violations += 1
                        counted_pairs.add((a["section"], b["section"]))
                        examples.append("%s: token %d issued to two holders (%s, %s)"
                                        % (lock, token, a["client"], b["client"]))
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if b["start"] > a["end"]:
                    break  # sorted by start: no later section can overlap a either
                overlaps += 1
                begin, end = b["start"], min(a["end"], b["end"])
                examples.append("%s: overlap %.3f s: %s (pid %d, token %s, %s) and %s "
                                "(pid %d, token %s)" % (lock, end - begin, a["client"], a["pid"],
                                                        a["fence"], a["why"], b["client"],
                                                        b["pid"], b["fence"]))
                if _accepted_within(a, begin, end) and _accepted_within(b, begin, end) and \
                        (a["section"], b["section"]) not in counted_pairs:
                    violations += 1
                    examples.append("%s: both %s (token %s) and %s (token %s) had writes "
                                    "accepted inside their overlap"
                                    % (lock, a["client"], a["fence"], b["client"], b["fence"]))
    runs = [r for r in records if r.get("ev") == "run"]
    statuses = collections.Counter(r["status"] for r in runs)
    return {
        "sections": len(sections),
        "overlaps": overlaps,
        "fenced_violations": violations,
        "stopped": statuses.get(79, 0),
        "hangs": sum(1 for r in runs if r.get("hang")),
        "statuses": dict(sorted(statuses.items(), key=lambda kv: str(kv[0]))),
        "examples": examples,
    }
