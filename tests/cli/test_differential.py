"""Differential test: a random setnx/get/getset/del sequence, identical on file store and Redis."""
import os
import random
import unittest

from harness import NxlockTestCase

STEPS = 400

# A small pool so that operations collide on the same keys; several keys are
# awkward for argument parsing or for a store that maps keys to file names.
KEYS = [
    b"k",
    b"key with spaces",
    "ключ-✓".encode(),
    b"-dash",             # only reachable after `--`
    b"line1\nline2",
    b"k/../k",            # must not be taken as a path by the file store
]

VALUES = [
    b"",
    b"plain",
    b"two  spaces ",
    b"line1\nline2",
    b"trailing newline\n",
    "ünïcødé ✓ 🔒".encode(),
    b"-1",
    b"--",
    b"\xff\xfe not utf-8",
    b"x" * 10000 + b"\nend",
]


class Model:
    """The contract's table for the key/value commands, on a Python dict."""

    def __init__(self):
        self.data = {}

    def run(self, cmd, args):
        if cmd == "setnx":
            key, value = args
            if key in self.data:
                return 1, b"0\n"
            self.data[key] = value
            return 0, b"1\n"
        if cmd == "get":
            (key,) = args
            if key not in self.data:
                return 1, b""
            return 0, self.data[key] + b"\n"
        if cmd == "getset":
            key, value = args
            old = self.data.get(key)
            self.data[key] = value
            return (1, b"") if old is None else (0, old + b"\n")
        if cmd == "del":
            removed = 0
            for key in set(args):  # Redis counts a repeated key once
                if self.data.pop(key, None) is not None:
                    removed += 1
            return (0 if removed else 1), b"%d\n" % removed
        raise ValueError(cmd)


def random_step(rng):
    """One command and its arguments, drawn so that every command and key comes up often."""
    cmd = rng.choice(["setnx", "setnx", "get", "get", "getset", "getset", "del"])
    if cmd == "del":
        # 2-3 keys half the time, drawn with replacement: a repeated key counts once.
        count = rng.choice([1, 1, 2, 3])
        return cmd, [rng.choice(KEYS) for _ in range(count)]
    key = rng.choice(KEYS)
    if cmd == "get":
        return cmd, [key]
    # A numbered suffix now and then, so that an old value shows which write it came from.
    value = rng.choice(VALUES)
    if rng.random() < 0.3:
        value += b" #%d" % rng.randrange(1000)
    return cmd, [key, value]


def argv(cmd, args, rng):
    """The command line; `--` whenever an argument needs it, and at random otherwise."""
    if any(a.startswith(b"-") for a in args) or rng.random() < 0.5:
        return [cmd, "--", *args]
    return [cmd, *args]


def show(data):
    """A value for a failure message: long ones are cut."""
    if len(data) <= 60:
        return repr(data)
    return "%r...(%d bytes)" % (data[:60], len(data))


def show_argv(line):
    return " ".join(show(arg) for arg in line)


class Differential(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def test_same_results_on_every_backend(self):
        seed = int(os.environ.get("NXLOCK_TEST_SEED") or random.randrange(2**32))
        print("\ndifferential: seed %d (rerun with NXLOCK_TEST_SEED=%d)" % (seed, seed))
        rng = random.Random(seed)

        # TCP and unix socket reach the same server: separate databases keep
        # their key spaces apart so all three run the sequence step by step.
        backends = [
            ("file", "file://" + self.store_path),
            ("tcp", self.redis.url + "/1"),
            ("unix", self.redis.unix_url + "?db=2"),
        ]
        model = Model()
        sequence = [random_step(rng) for _ in range(STEPS)]
        # Finish by reading every key, so the final states are compared too.
        sequence += [("get", [key]) for key in KEYS]

        compared = 0
        mismatches = []   # failure messages, one per step where the backends disagree
        model_errors = []  # steps where Redis disagrees with the test's own model
        for index, (cmd, args) in enumerate(sequence):
            line = argv(cmd, args, rng)
            expected = model.run(cmd, args)
            results = {}
            for name, url in backends:
                r = self.nx("-u", url, *line)
                results[name] = (r.returncode, r.stdout, r.stderr)
            compared += 1
            outcomes = {name: (status, out) for name, (status, out, _) in results.items()}
            # Exit 0/1 are results, not errors: nothing belongs on stderr.
            if len(set(outcomes.values())) != 1 or any(err for _, _, err in results.values()):
                report = "\n".join("  %-5s exit %s stdout %s stderr %s" % (
                    name, status, show(out), show(err))
                    for name, (status, out, err) in results.items())
                mismatches.append("step %d: nxlock %s\n%s\n  model exit %s stdout %s" % (
                    index, show_argv(line), report, expected[0], show(expected[1])))
            if outcomes["tcp"] != expected:
                model_errors.append(index)

        print("differential: %d steps × %d backends, %d mismatches" % (
            compared, len(backends), len(mismatches)))
        self.assertEqual(compared, len(sequence))
        self.assertGreaterEqual(compared, STEPS)
        # Once the stores diverge later steps differ too: the first mismatch is the one to read.
        if mismatches:
            self.fail("seed %d: %d mismatching steps, the first:\n%s" % (
                seed, len(mismatches), mismatches[0]))
        self.assertEqual(model_errors, [], "the test's model disagrees with Redis at these steps")


if __name__ == "__main__":
    unittest.main()
