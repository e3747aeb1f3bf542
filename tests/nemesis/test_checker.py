"""The checker on hand-made histories: it must count what is there, and nothing more.

Run: python3 -m unittest discover -s tests/nemesis -p 'test_*.py'
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402


def section(number, client, token, writes, end, lock="x", kind=None, slots=None, slot=None):
    """A job's records: `writes` [(t, accepted)], the first being its start; `end` its end
    record's time, or None for a job killed by SIGKILL. `kind` as job.py --kind gives it
    (none: an exclusive holder's records, as before kinds were recorded)."""
    base = {"section": "s%d" % number, "lock": lock, "client": client, "pid": 100 + number,
            "fence": token}
    if kind is not None:
        base.update(kind=kind, slots=slots, slot=slot)
    records = [dict(base, ev="start" if i == 0 else "write", t=t, ok=ok)
               for i, (t, ok) in enumerate(writes)]
    if end is not None:
        records.append(dict(base, ev="end", t=end, why="done"))
    return records


def run(status, hang=False):
    return {"ev": "run", "client": "A", "lock": "x", "status": status, "hang": hang, "t": 0}


class CheckerTest(unittest.TestCase):
    def test_holders_one_after_another_with_rising_tokens_are_clean(self):
        counts = checker.check(section(1, "A", 1, [(0, True), (0.5, True)], 1.0) +
                               section(2, "B", 2, [(1.1, True)], 2.0))
        self.assertEqual((counts["sections"], counts["overlaps"], counts["fenced_violations"]),
                         (2, 0, 0))

    def test_a_paused_holder_refused_by_the_resource_is_an_overlap_not_a_violation(self):
        counts = checker.check(section(1, "A", 1, [(0, True), (0.5, True), (2.5, False)], 3.0) +
                               section(2, "B", 2, [(1.0, True), (2.0, True)], 4.0))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (1, 0))

    def test_two_holders_both_accepted_inside_their_overlap_are_a_violation(self):
        # Rising tokens, but the stale holder's write at 2.5 was accepted (a resource that
        # did not check): only the overlap rule can see it.
        counts = checker.check(section(1, "A", 1, [(0, True), (2.5, True)], 3.0) +
                               section(2, "B", 2, [(1.0, True), (2.0, True)], 4.0))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (1, 1))
        # Equal tokens: the resource (token >= highest) accepts both; one violation.
        counts = checker.check(section(1, "A", 1, [(0, True), (2.5, True)], 3.0) +
                               section(2, "B", 1, [(1.0, True), (2.0, True)], 4.0))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (1, 1))

    def test_overlaps_within_the_allowance_are_counted_apart(self):
        # A holder whose key was deleted at 1.0 ends 0.5 s into the next one's section
        # (learnt at its next renewal); the resource refused its write inside the overlap.
        history = (section(1, "A", 1, [(0, True), (1.3, False)], 1.5) +
                   section(2, "B", 2, [(1.0, True)], 3.0) +
                   section(3, "C", 3, [(3.1, True), (4.0, False)], 4.0) +
                   section(4, "A", 4, [(3.2, True)], 5.0))
        counts = checker.check(history, allowance=0.6)
        self.assertEqual((counts["overlaps"], counts["brief_overlaps"],
                          counts["fenced_violations"]), (1, 1, 0))
        self.assertEqual(len([e for e in counts["examples"] if "overlap" in e]), 1)
        counts = checker.check(history)
        self.assertEqual((counts["overlaps"], counts["brief_overlaps"]), (2, 0))

    def test_a_token_that_goes_back_or_repeats_counts_each_holder_once(self):
        counts = checker.check(section(1, "A", 5, [(0, True)], 0.9) +
                               section(2, "B", 3, [(1.0, False)], 2.0) +
                               section(3, "C", 3, [(2.5, False)], 3.0) +
                               section(4, "A", 3, [(3.5, False)], 4.0))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (0, 3))

    def test_overlapping_holders_whose_tokens_run_backwards_are_fenced_by_the_resource(self):
        # A restart lost B's lock: A took it after B (a higher token) but A's job
        # started first. B's writes after A's are refused: fencing held.
        counts = checker.check(section(1, "A", 9, [(0, True), (1.0, True)], 2.0) +
                               section(2, "B", 5, [(0.5, False), (1.5, False)], 2.5))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (1, 0))
        # Both accepted inside the overlap: a violation, whatever the order.
        counts = checker.check(section(1, "A", 9, [(0, True), (1.0, True)], 2.0) +
                               section(2, "B", 5, [(0.5, True), (1.5, True)], 2.5))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (1, 1))

    def test_a_killed_job_ends_at_its_last_write(self):
        killed = section(1, "A", 1, [(0, True), (1.0, True)], None)
        self.assertEqual(checker.check(killed + section(2, "B", 2, [(1.05, True)], 2))["overlaps"],
                         0)
        self.assertEqual(checker.check(killed + section(2, "B", 2, [(0.95, True)], 2))["overlaps"],
                         1)

    def test_sections_of_different_locks_never_overlap(self):
        counts = checker.check(section(1, "A", 1, [(0, True)], 3.0, lock="redis") +
                               section(2, "B", 1, [(1.0, True)], 2.0, lock="file"))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (0, 0))

    def test_a_holder_without_a_token_is_a_violation(self):
        self.assertEqual(checker.check(section(1, "A", None, [(0, False)], 1))["fenced_violations"],
                         1)

    def test_runs_count_stops_and_hangs(self):
        counts = checker.check([run(0), run(79), run(79), run(None, hang=True)])
        self.assertEqual((counts["stopped"], counts["hangs"]), (2, 1))


class KindsTest(unittest.TestCase):
    """Shared and slot holders (job.py --kind): which overlaps are allowed."""

    def shared(self, number, token, start, end, accepted=True):
        return section(number, "S%d" % number, token, [(start, accepted)], end, kind="shared")

    def slot(self, number, token, start, end, slot, slots=2):
        return section(number, "N%d" % number, token, [(start, True)], end, kind="slots",
                       slots=slots, slot=slot)

    def test_shared_holders_together_are_clean(self):
        counts = checker.check(self.shared(1, 1, 0, 2) + self.shared(2, 2, 0.5, 3) +
                               self.shared(3, 3, 1, 1.5))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (0, 0))

    def test_an_exclusive_holder_inside_shared_ones_is_an_overlap(self):
        counts = checker.check(self.shared(1, 1, 0, 2) +
                               section(2, "A", 2, [(1.0, True)], 1.5, kind="exclusive"))
        self.assertEqual(counts["overlaps"], 1)
        # Both writes accepted inside the overlap (tokens 1 then 2, no refusal): fenced too.
        self.assertEqual(counts["fenced_violations"], 0)

    def test_shared_and_slot_holders_together_are_an_overlap(self):
        counts = checker.check(self.shared(1, 1, 0, 2) + self.slot(2, 2, 1.0, 3, slot=1))
        self.assertEqual(counts["overlaps"], 1)

    def test_slots_up_to_n_are_clean_one_more_is_an_overlap(self):
        two = self.slot(1, 1, 0, 2, slot=1) + self.slot(2, 2, 0.5, 2.5, slot=2)
        self.assertEqual(checker.check(two)["overlaps"], 0)
        counts = checker.check(two + self.slot(3, 3, 1.0, 1.5, slot=2))
        # A third while two run (slot 2 twice): the slot count and the shared slot.
        self.assertGreaterEqual(counts["overlaps"], 1)
        self.assertTrue(any("slot sections of 2" in e for e in counts["examples"]),
                        counts["examples"])

    def test_one_slot_twice_at_once_is_an_overlap(self):
        counts = checker.check(self.slot(1, 1, 0, 2, slot=1, slots=3) +
                               self.slot(2, 2, 0.5, 2.5, slot=1, slots=3))
        self.assertEqual(counts["overlaps"], 1)

    def test_tokens_rise_across_kinds(self):
        # A shared holder, then an exclusive one, then a slot holder whose token is below
        # the shared one's: it took its hold after both ended.
        counts = checker.check(self.shared(1, 5, 0, 1) +
                               section(2, "A", 7, [(1.5, True)], 2, kind="exclusive") +
                               self.slot(3, 6, 2.5, 3, slot=1))
        self.assertEqual(counts["fenced_violations"], 1)
        self.assertTrue(any("token went from 7" in e for e in counts["examples"]),
                        counts["examples"])

    def test_a_shared_holder_whose_job_starts_late_may_have_the_lower_token(self):
        # S1 took its lease first (token 4) but its job started after S2's ended: both
        # held at once, as shared holders may. Likewise two slots; one slot twice may not.
        counts = checker.check(self.shared(1, 5, 0, 0.4) + self.shared(2, 4, 0.5, 1))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (0, 0))
        counts = checker.check(self.slot(1, 5, 0, 0.4, slot=1) + self.slot(2, 4, 0.5, 1, slot=2))
        self.assertEqual(counts["fenced_violations"], 0)
        counts = checker.check(self.slot(1, 5, 0, 0.4, slot=1) + self.slot(2, 4, 0.5, 1, slot=1))
        self.assertEqual(counts["fenced_violations"], 1)

    def test_a_shared_take_without_a_new_token_is_a_violation(self):
        counts = checker.check(self.shared(1, 4, 0, 2) + self.shared(2, 4, 0.5, 3))
        self.assertEqual((counts["overlaps"], counts["fenced_violations"]), (0, 1))


if __name__ == "__main__":
    unittest.main()
