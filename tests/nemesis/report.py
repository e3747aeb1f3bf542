"""The nemesis's output: the table (stdout), the one JSON object (--json), and the details of
what failed (stderr: the reasons, a few examples, where the history was kept)."""
import json

COLUMNS = ("rounds", "sections", "overlaps", "fenced_violations", "stopped", "hangs")
HEADERS = ("rounds", "sections", "overlaps", "fenced", "stopped", "hangs")


def verdict(extra, result):
    if result.get("skipped"):
        return "skipped"
    return "FAIL" if extra["failures"] else "ok"


def table(results):
    """The table's lines, one row per scenario."""
    lines = ["%-21s %s %-8s %s" % ("scenario", " ".join("%8s" % h for h in HEADERS),
                                   "expected", "result"),
             "-" * 101]
    for result, extra in results:
        lines.append("%-21s %s %-8s %s" % (
            result["name"], " ".join("%8d" % result[c] for c in COLUMNS),
            "overlaps" if result["expected_overlaps"] else "-",
            verdict(extra, result)))
    return lines


def details(results, examples=3):
    """The lines that explain each row: exit statuses, and for a failure its reasons,
    a few examples from the checker and the kept history."""
    lines = []
    for result, extra in results:
        statuses = ", ".join("%s×%d" % (status if status is not None else "hang", n)
                             for status, n in extra["statuses"].items())
        lines.append("%s (%.0f s): nxlock exits %s" % (result["name"], extra["seconds"],
                                                        statuses or "none"))
        for note in extra["notes"]:
            lines.append("  note: " + note)
        for reason in extra["failures"]:
            lines.append("  FAIL: " + reason)
        for example in extra["examples"][:examples]:
            lines.append("    " + example)
        if len(extra["examples"]) > examples:
            lines.append("    ... %d more" % (len(extra["examples"]) - examples))
        if extra["history"]:
            lines.append("  history: " + extra["history"])
    return lines


def as_json(results):
    return json.dumps({"scenarios": [result for result, _ in results]})
