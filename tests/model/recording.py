"""How a rule of the machine draws a value or a job (pick), and what it drew: each rule
notes its call and its draws (recorded), the step list a failure prints and
regressions/ keeps (replay.py)."""
import functools

from hypothesis import strategies as st


def pick(data, choices, label):
    """One of `choices` (a list that may be longer or shorter when a replay got other
    answers where the model allows several): an index drawn from a fixed range, so the
    same draw stays valid (sampled_from of another length would reject it). A replayed
    step list (replay.py) chooses the value or job it names."""
    if hasattr(data, "choose"):
        return data.choose(choices, label)
    return choices[data.draw(st.integers(0, 63), label=label) % len(choices)]


class Recording:
    """Hypothesis's `data` for one step of a run, noting what the step drew (by label) as a
    step list keeps it (replay.py): a value by its script name, a job by its number."""

    def __init__(self, lock_machine, data, draws):
        self.machine, self.data, self.draws = lock_machine, data, draws

    def draw(self, strategy, label=None):
        drawn = self.data.draw(strategy, label=label)
        self.draws[label] = drawn
        return drawn

    def choose(self, choices, label):
        chosen = pick(self.data, choices, label)
        self.draws[label] = chosen.number if label == "job" else self.machine.script.names[chosen]
        return chosen


def recorded(rule_function):
    """Notes each call of a rule in the machine's `steps_taken`: the step list a failure
    prints, to keep as a regression (replay.py)."""
    @functools.wraps(rule_function)
    def step(self, **arguments):
        draws = {}
        if "data" in arguments:
            arguments["data"] = Recording(self, arguments["data"], draws)
        taken = {name: value for name, value in arguments.items() if name != "data"}
        self.steps_taken.append([rule_function.__name__, taken, draws] if "data" in arguments
                                else [rule_function.__name__, taken])
        return rule_function(self, **arguments)
    return step
