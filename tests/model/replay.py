"""Kept regressions as data: a step list (regressions/BACKEND-NAME.json) replayed through
the model machine (machine.py), so that each step's answer is predicted by today's model,
as etcd's robustness tests keep a failed history and check it again.

A file holds `found` (what the run that found it said), `complaint` (the checker's words
then) and `steps`, one per line: [RULE, ARGUMENTS] or [RULE, ARGUMENTS, DRAWS], RULE a rule
of LockModelMachine called with ARGUMENTS, the model's invariant checked after each, as a
run does. DRAWS are what the rule draws from hypothesis's `data`, by label: a garbage
value as itself; a value a command printed by the name the script gives it ("v3": the
third value a lock or renew printed); a job by its number. "invariant" is a step whose
rule did nothing: the invariant alone.
"""
import inspect
import json

import machine


class StepError(Exception):
    """The step list no longer applies: a value or job it names is not there to pick."""


class Draws:
    """Hypothesis's `data` for one replayed step: the recorded draws, by label."""

    def __init__(self, lock_machine, draws):
        self.machine = lock_machine
        self.draws = draws

    def recorded(self, label):
        if label not in self.draws:
            raise StepError("the step records no draw %r" % label)
        return self.draws[label]

    def draw(self, strategy, label=None):
        return self.recorded(label)

    def choose(self, choices, label):
        """recording.pick's choice: the recorded value (by its script name) or job (number)."""
        name = self.recorded(label)
        if label == "job":
            found = [job for job in choices if job.number == name]
        else:
            value = self.machine.script.printed.get(name)
            found = [choice for choice in choices if value is not None and choice == value]
        if not found:
            raise StepError("%s %r is not among the choices (%r)" % (label, name, choices))
        return found[0]


def load(path):
    with open(path) as f:
        return json.load(f)


def dump(path, found, complaint, steps):
    """Writes a step list as regressions/ keeps it: one step a line."""
    with open(path, "w") as f:
        f.write('{\n  "found": %s,\n  "complaint": %s,\n  "steps": [\n%s\n  ]\n}\n'
                % (json.dumps(found), json.dumps(complaint),
                   ",\n".join("    " + json.dumps(step) for step in steps)))


def run_steps(steps):
    """Runs `steps` on a fresh machine (machine.Config names the backend); raises
    machine.Mismatch where the binary and today's model disagree. Returns the machine."""
    lock_machine = machine.LockModelMachine()
    try:
        for step in steps:
            rule, arguments = step[0], dict(step[1]) if len(step) > 1 else {}
            if rule != "invariant":
                method = getattr(lock_machine, rule)
                if "data" in inspect.signature(method).parameters:
                    arguments["data"] = Draws(lock_machine, step[2] if len(step) > 2 else {})
                method(**arguments)
            lock_machine.agrees()
    finally:
        lock_machine.teardown()
    return lock_machine
