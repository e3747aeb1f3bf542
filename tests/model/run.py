#!/usr/bin/python3
"""Runs the model checker (machine.py) on one backend, or replays kept step lists.

  run.py BACKEND                  short mode: a fixed seed, a few hundred steps, shrinking capped
  run.py BACKEND --long           long mode: a random seed, thousands of steps
  run.py BACKEND --seed N [--examples E --steps S]
  run.py BACKEND --replay FILE... kept step lists (replay.py), against this backend
  run.py --replay-dir regressions every regressions/BACKEND-*.json against its backend
  NXLOCK_MODEL_LONG=1 makes the short mode long (scripts/test passes nothing);
  NXLOCK_MODEL_SHRINK_SECONDS=S shrinks a failure for S seconds (the short mode: 60).

BACKEND: embedded, redis, cluster, quorum or etcd (exclusive holds only: --shared and
--slots are predicted to exit 64 there, as the man page's ETCD says). A failure prints the
shrunk steps as a bash script of nxlock commands (and writes it beside the temp dir it
names, with the same steps as a step list to keep in regressions/); exit status 1.
"""
import argparse
import glob
import os
import random
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hypothesis  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis.internal.conjecture import engine  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

import backends  # noqa: E402
import machine  # noqa: E402
import replay as replay_steps  # noqa: E402

SHORT_SEED = 33
# Short mode, per backend: examples x steps, expiry waits per example, shrinking's bounds.
SHORT = {"examples": 5, "steps": 80, "waits": 1, "shrinks": 40, "shrink_seconds": 60}
LONG = {"examples": 60, "steps": 100, "waits": 2, "shrinks": 500, "shrink_seconds": 300}
# etcd's short mode in ctest's budget (about 20 s): every write waits for etcd's fsync, and
# a short hold's expiry wait is a second longer there (machine.py, wait_expiry).
SHORT_BY_BACKEND = {"etcd": {"examples": 3}}


def cap_shrinking(count, seconds):
    """At most `count` shrinks and `seconds` of shrinking: each try re-runs real commands."""
    engine.MAX_SHRINKS = count
    original = engine.ConjectureRunner.test_function

    def test_function(self, data):
        deadline = getattr(self, "finish_shrinking_deadline", None)
        if deadline is not None and not getattr(self, "_model_capped", False):
            self.finish_shrinking_deadline = time.perf_counter() + seconds
            self._model_capped = True
        return original(self, data)

    engine.ConjectureRunner.test_function = test_function


def full_length_examples():
    """Hypothesis starts with ten small examples (a run of a step or two, here): with the
    few examples a short run can afford, every example is then tiny. Skip that phase."""
    engine.clamp = lambda lower, value, upper: -1


def check(backend_name, mode, seed):
    backend = backends.BACKENDS[backend_name]()
    try:
        machine.Config.backend = backend
        machine.Config.waits = mode["waits"]
        machine.Config.header = ["nxlock model checker: backend %s, seed %d" % (backend_name, seed),
                                 "run: NXLOCK_BIN=build/dev/nxlock bash THIS-FILE"]
        cap_shrinking(mode["shrinks"], mode["shrink_seconds"])
        full_length_examples()
        chosen = settings(max_examples=mode["examples"], stateful_step_count=mode["steps"],
                          deadline=None, database=None, report_multiple_bugs=False,
                          suppress_health_check=list(HealthCheck),
                          phases=mode["phases"], print_blob=False)
        factory = hypothesis.seed(seed)(machine.LockModelMachine)
        started = time.monotonic()
        try:
            run_state_machine_as_test(factory, settings=chosen)
        except Exception as error:  # noqa: BLE001 - any failure: print the shrunk script
            # The last run that failed: the final replay, or, when a replay did not fail
            # again (timing: a renewal, an expiry), the smallest run that did.
            last = machine.Config.last_failed or machine.Config.last_machine
            text = last.script.text() if last else "(no steps)"
            path = os.path.join(os.path.dirname(backend.tmp), "nxlock-model-%s-seed%d.sh"
                                % (backend_name, seed))
            with open(path, "w") as f:
                f.write(text)
            # The same steps as data: copied to regressions/BACKEND-NAME.json (a line of what
            # it found in "found"), model.regressions replays them through the model.
            steps_path = path[:-len(".sh")] + ".json"
            replay_steps.dump(steps_path, machine.Config.header[:1], str(error),
                              last.steps_taken if last else [])
            if not isinstance(error, machine.Mismatch):
                traceback.print_exc()
            if machine.Config.skipped:
                print("mismatches let pass (NXLOCK_MODEL_SKIP): %s" % machine.Config.skipped)
            print("FAILED on %s (seed %d): %s\n--- the shrunk steps, as a script (%s; as a step "
                  "list to keep in regressions/: %s) ---\n%s"
                  % (backend_name, seed, error, path, steps_path, text))
            return 1
        if os.environ.get("NXLOCK_MODEL_PROFILE"):
            print("seconds per rule: %s" % {k: round(v, 1) for k, v in machine.Config.seconds.items()})
        if machine.Config.skipped:
            print("mismatches let pass (NXLOCK_MODEL_SKIP): %s" % machine.Config.skipped)
        print("model %s: %d examples of up to %d steps, seed %d: %d steps, %d commands, passed "
              "in %.1f s" % (backend_name, mode["examples"], mode["steps"], seed,
                             machine.Config.steps, machine.Config.commands,
                             time.monotonic() - started))
        return 0
    finally:
        backend.stop()


def replay(backend_name, paths):
    """Replays each kept step list (replay.py) through today's model, on a fresh instance
    of the backend; all must pass. A failure prints the replay's steps as a script."""
    backend = backends.BACKENDS[backend_name]()
    failed = 0
    try:
        machine.Config.backend = backend
        # Every short hold and expiry wait the list asks for (a run's budget is no limit here).
        machine.Config.waits = 1000
        for path in paths:
            machine.Config.header = ["replay of %s on %s" % (os.path.basename(path), backend_name)]
            machine.Config.last_failed = None
            kept = replay_steps.load(path)
            try:
                replay_steps.run_steps(kept["steps"])
            except (machine.Mismatch, replay_steps.StepError) as error:
                failed += 1
                last = machine.Config.last_failed or machine.Config.last_machine
                print("%s: FAILED: %s\n  found as: %s\n--- the replay, as a script ---\n%s"
                      % (path, error, kept.get("complaint"), last.script.text() if last else ""))
            else:
                print("%s: passed" % path)
    finally:
        backend.stop()
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("backend", nargs="?", choices=sorted(backends.BACKENDS))
    parser.add_argument("--long", action="store_true")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--examples", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--no-shrink", action="store_true", help="report the first failure as found")
    parser.add_argument("--replay", nargs="+", metavar="FILE")
    parser.add_argument("--replay-dir", metavar="DIR",
                        help="every DIR/BACKEND-*.json, each against its backend")
    options = parser.parse_args()
    if options.replay_dir:
        failed = 0
        for name in sorted(backends.BACKENDS):
            paths = sorted(glob.glob(os.path.join(options.replay_dir, name + "-*.json")))
            if paths:
                failed |= replay(name, paths)
        return failed
    if options.backend is None:
        parser.error("a backend, or --replay-dir")
    if options.replay:
        return replay(options.backend, options.replay)
    long_mode = options.long or os.environ.get("NXLOCK_MODEL_LONG") == "1"
    mode = dict(LONG) if long_mode else dict(SHORT, **SHORT_BY_BACKEND.get(options.backend, {}))
    mode["phases"] = [Phase.generate] if options.no_shrink else [Phase.generate, Phase.shrink]
    if os.environ.get("NXLOCK_MODEL_SHRINK_SECONDS"):
        # More shrinking than the short mode's cap: a shorter script for a report.
        mode["shrink_seconds"] = float(os.environ["NXLOCK_MODEL_SHRINK_SECONDS"])
        mode["shrinks"] = 500
    if options.examples:
        mode["examples"] = options.examples
    if options.steps:
        mode["steps"] = options.steps
    seed = options.seed if options.seed is not None else (
        random.randrange(1 << 32) if long_mode else SHORT_SEED)
    print("model %s: %s mode, seed %d (rerun: run.py %s --seed %d%s)"
          % (options.backend, "long" if long_mode else "short", seed, options.backend, seed,
             " --long" if long_mode else ""), flush=True)
    return check(options.backend, mode, seed)


if __name__ == "__main__":
    sys.exit(main())
