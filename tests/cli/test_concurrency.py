"""Concurrency test: 8 processes hammer one embedded store; nothing torn, lost or read twice."""
import json
import os
import random
import subprocess
import sys
import time
import unittest

from harness import BIN, COMMAND_TIMEOUT, NxlockTestCase, die_with_parent, dying_with_parent

WORKERS = 8
OPS_PER_WORKER = 120
SHARED_KEYS = [b"shared-a", b"shared b", "shared-ç".encode()]
WORKER_TIMEOUT = 300  # seconds for all workers together


def private_keys(worker):
    return [b"p%d-%d" % (worker, i) for i in range(3)]


def worker_main(worker, seed, url, log_path):
    """Runs in a child python: waits for a go line on stdin, then logs every command it runs."""
    rng = random.Random(seed)
    mine = private_keys(worker)
    sys.stdin.readline()  # all workers start together
    with open(log_path, "w") as log:
        for seq in range(OPS_PER_WORKER):
            shared = rng.random() < 0.6
            key = rng.choice(SHARED_KEYS if shared else mine)
            cmd = rng.choice(["setnx", "setnx", "getset", "getset", "del", "get"])
            keys, value = [key], None
            if cmd in ("setnx", "getset"):
                value = b"w%d-%d" % (worker, seq)  # unique across the whole run
            elif cmd == "del" and not shared and rng.random() < 0.3:
                # Several private keys at once; shared keys are deleted one at a
                # time so the conservation law per key stays exact.
                keys = rng.sample(mine, rng.choice([2, 3]))
            args = keys + ([value] if value is not None else [])
            t0 = time.monotonic()
            r = subprocess.run(dying_with_parent([BIN, "-u", url, cmd, "--", *args]),
                               capture_output=True, timeout=COMMAND_TIMEOUT)
            t1 = time.monotonic()
            log.write(json.dumps({
                "worker": worker, "seq": seq, "cmd": cmd, "keys": [k.hex() for k in keys],
                "value": value.hex() if value is not None else None,
                "rc": r.returncode, "out": r.stdout.hex(), "err": r.stderr.hex(),
                "t0": t0, "t1": t1}) + "\n")


def load_ops(path):
    ops = []
    with open(path) as log:
        for line in log:
            op = json.loads(line)
            op["keys"] = [bytes.fromhex(k) for k in op["keys"]]
            op["key"] = op["keys"][0]
            op["value"] = bytes.fromhex(op["value"]) if op["value"] is not None else None
            op["out"] = bytes.fromhex(op["out"])
            op["err"] = bytes.fromhex(op["err"])
            ops.append(op)
    return ops


def returned_value(op):
    """The value a get or getset reported, or None when it reported none."""
    if op["cmd"] in ("get", "getset") and op["rc"] == 0:
        return op["out"][:-1]
    return None


def describe(op):
    return "worker %d op %d: %s %r %r -> exit %d stdout %r stderr %r" % (
        op["worker"], op["seq"], op["cmd"], op["keys"], op["value"], op["rc"], op["out"],
        op["err"])


class Concurrency(NxlockTestCase):
    checks = 0

    def check(self, condition, message):
        self.checks += 1
        self.assertTrue(condition, message)

    def run_workers(self, url, seed):
        logs = [os.path.join(self.tmp, "worker-%d.log" % w) for w in range(WORKERS)]
        procs = []
        try:
            for w in range(WORKERS):
                procs.append(subprocess.Popen(
                    [sys.executable, __file__, "--worker", str(w), str(seed + w), url, logs[w]],
                    stdin=subprocess.PIPE, env=self.env, preexec_fn=die_with_parent))
            for p in procs:
                p.stdin.write(b"go\n")
                p.stdin.close()
            deadline = time.monotonic() + WORKER_TIMEOUT
            for p in procs:
                p.wait(timeout=max(1, deadline - time.monotonic()))
                self.assertEqual(p.returncode, 0, "a worker failed")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return [op for path in logs for op in load_ops(path)]

    def final_state(self, keys, url):
        """get of every key: it must succeed (0 or 1, never 65 for a torn record)."""
        state = {}
        for key in keys:
            r = self.nx("-u", url, "get", "--", key)
            self.check(r.returncode in (0, 1) and not r.stderr,
                       "final get %r: exit %d %r" % (key, r.returncode, r.stderr))
            state[key] = r.stdout[:-1] if r.returncode == 0 else None
        return state

    def test_workers_on_one_store(self):
        seed = int(os.environ.get("NXLOCK_TEST_SEED") or random.randrange(2**32))
        print("\nconcurrency: seed %d (rerun with NXLOCK_TEST_SEED=%d)" % (seed, seed))
        url = "file://" + self.store_path
        start = time.monotonic()
        ops = self.run_workers(url, seed)
        elapsed = time.monotonic() - start
        self.assertEqual(len(ops), WORKERS * OPS_PER_WORKER, "every worker logs every command")

        all_keys = SHARED_KEYS + [k for w in range(WORKERS) for k in private_keys(w)]
        final = self.final_state(all_keys, url)

        # Every command reports one of its results in the documented shape.
        for op in ops:
            self.check(op["rc"] in (0, 1) and not op["err"], describe(op))
            if op["cmd"] == "setnx":
                self.check(op["out"] == (b"1\n" if op["rc"] == 0 else b"0\n"), describe(op))
            elif op["cmd"] == "del":
                self.check(op["out"].endswith(b"\n") and op["out"][:-1].isdigit()
                           and (int(op["out"]) > 0) == (op["rc"] == 0), describe(op))
            else:
                self.check(op["out"].endswith(b"\n") if op["rc"] == 0 else op["out"] == b"",
                           describe(op))

        # Which command wrote which value: setnx that set, and every getset.
        # A setnx that reported 0 wrote nothing, so its value must never show up.
        writer = {}
        for op in ops:
            if op["cmd"] == "getset" or (op["cmd"] == "setnx" and op["rc"] == 0):
                writer[op["value"]] = op
        written = {value: op["key"] for value, op in writer.items()}

        # (a) Nothing torn: every value read back is one written to that same key,
        # by a command that had started before the read finished.
        for op in ops:
            value = returned_value(op)
            if value is not None:
                self.check(written.get(value) == op["key"],
                           "returned a value never written to that key: " + describe(op))
                self.check(writer[value]["t0"] < op["t1"],
                           "returned a value before its writer started: %s\nwriter: %s" % (
                               describe(op), describe(writer[value])))
        for key, value in final.items():
            if value is not None:
                self.check(written.get(value) == key, "final %r = %r never written" % (key, value))

        # (b) Nothing lost, nothing read twice, on each shared key.
        for key in SHARED_KEYS:
            on_key = [op for op in ops if op["key"] == key]
            taken = [returned_value(op) for op in on_key
                     if op["cmd"] == "getset" and op["rc"] == 0]
            twice = sorted({v for v in taken if taken.count(v) > 1})
            self.check(not twice, "%r: values returned by two getset calls: %r\n%s" % (
                key, twice, "\n".join(describe(op) for op in on_key
                                      if op["cmd"] == "getset" and returned_value(op) in twice)))
            created = sum(1 for op in on_key if op["cmd"] == "setnx" and op["rc"] == 0)
            created += sum(1 for op in on_key if op["cmd"] == "getset" and op["rc"] == 1)
            deleted = sum(1 for op in on_key if op["cmd"] == "del" and op["out"] == b"1\n")
            exists = 1 if final[key] is not None else 0
            self.check(created - deleted == exists,
                       "%r: %d created - %d deleted != %d existing at the end" % (
                           key, created, deleted, exists))
            if final[key] is not None:
                self.check(final[key] not in taken,
                           "%r: final value %r was also returned by a getset" % (key, final[key]))

        # (c) Private keys: a serial replay of each worker's own commands.
        for w in range(WORKERS):
            mine = private_keys(w)
            model = {}
            for op in sorted((op for op in ops if op["worker"] == w and op["key"] in mine),
                             key=lambda op: op["seq"]):
                self.check(op_result(model, op) == (op["rc"], op["out"]),
                           "private key result differs from the model: " + describe(op))
            for key in mine:
                self.check(final[key] == model.get(key),
                           "final %r = %r, model says %r" % (key, final[key], model.get(key)))

        # The test only means something if commands really ran at the same time.
        overlapping = count_overlapping(ops)
        self.check(overlapping > 0, "no two workers' commands on a shared key overlapped")

        print("concurrency: %d processes, %d operations (%d on a shared key overlapping another"
              " worker's on that key), %d checks, %.1f s" % (
                  WORKERS, len(ops), overlapping, self.checks, elapsed))


def op_result(model, op):
    """Applies op to the dict model; returns the (exit status, stdout) the man page gives."""
    key, value = op["key"], op["value"]
    if op["cmd"] == "setnx":
        if key in model:
            return 1, b"0\n"
        model[key] = value
        return 0, b"1\n"
    if op["cmd"] == "get":
        return (0, model[key] + b"\n") if key in model else (1, b"")
    if op["cmd"] == "getset":
        old = model.get(key)
        model[key] = value
        return (1, b"") if old is None else (0, old + b"\n")
    removed = sum(1 for k in op["keys"] if model.pop(k, None) is not None)
    return (0 if removed else 1), b"%d\n" % removed


def count_overlapping(ops):
    """How many commands on a shared key ran (by the wall clock) while another worker's
    command on the same key was running."""
    ops = sorted((op for op in ops if op["key"] in SHARED_KEYS), key=lambda op: op["t0"])
    overlapping = set()
    for i, a in enumerate(ops):
        for b in ops[i + 1:]:
            if b["t0"] >= a["t1"]:
                break
            if b["worker"] != a["worker"] and b["key"] == a["key"]:
                overlapping.update((id(a), id(b)))
    return len(overlapping)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        unittest.main()
