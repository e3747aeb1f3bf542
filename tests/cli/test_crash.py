"""Crash test: writers SIGKILLed at random moments leave the embedded store whole and current."""
import os
import random
import re
import signal
import subprocess
import time
import unittest

from harness import COMMAND_TIMEOUT, NxlockTestCase, files_under

KILLS_WANTED = 200
MAX_ATTEMPTS = 2000
MAX_DELAY = 0.006  # seconds between starting a writer and killing it, at least
PROBE_KEYS = 64    # candidate keys tried to find pairs that share a stripe directory


def short(value):
    """A value for a failure message: long ones are cut."""
    if value is None or len(value) <= 40:
        return repr(value)
    return "%r...(%d bytes)" % (value[:40], len(value))


class Crash(NxlockTestCase):
    def pick_keys(self):
        """Six keys: two pairs that share a stripe directory (data/XY), if found, and others.

        Keys of one stripe are written next to each other, under one lock and with
        one temporary file name, so a crash while writing one must not damage the other.
        """
        probe = os.path.join(self.tmp, "probe")
        url = "file://" + probe
        stripe_of = {}
        for i in range(PROBE_KEYS):
            key = "key-%d" % i
            before = files_under(probe) if os.path.isdir(probe) else set()
            r = self.nx("-u", url, "setnx", key, "x")
            self.assertEqual(r.returncode, 0, r.stderr)
            new = sorted(files_under(probe) - before)
            records = [path for path in new if path.startswith("data" + os.sep)]
            if records:
                stripe_of[key] = os.path.dirname(records[0])
        by_stripe = {}
        for key, stripe in stripe_of.items():
            by_stripe.setdefault(stripe, []).append(key)
        shared = [keys[:2] for keys in by_stripe.values() if len(keys) >= 2][:2]
        keys = [key for pair in shared for key in pair]
        loners = [key for key in ("key-%d" % i for i in range(PROBE_KEYS)) if key not in keys]
        keys += loners[:6 - len(keys)]
        print("crash: keys %s (%d sharing a stripe directory)" % (
            keys, sum(len(pair) for pair in shared)))
        return [key.encode() for key in keys]

    def max_delay(self):
        """How long to wait at most before the kill: 0-6 ms, or longer on a slow (loaded)
        machine, so that kills land anywhere in a writer's life, not only in its start-up."""
        times = []
        for i in range(10):
            p = self.popen("-u", self.url, "getset", "calibrate", "c%d" % i,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Timed from when Popen returns (the binary has been exec'd), as the delay is.
            start = time.monotonic()
            p.wait(timeout=COMMAND_TIMEOUT)
            times.append(time.monotonic() - start)
        self.assertEqual(self.nx("-u", self.url, "del", "calibrate").returncode, 0)
        # The first run creates the store; the median of the rest is a typical write.
        return max(MAX_DELAY, 1.2 * sorted(times[1:])[4])

    def read(self, key):
        r = self.nx("-u", self.url, "get", key)
        self.assertIn(r.returncode, (0, 1),
                      "get %r after a crash: exit %d %r" % (key, r.returncode, r.stderr))
        self.assertEqual(r.stderr, b"")
        return r.stdout[:-1] if r.returncode == 0 else None

    def test_sigkill_writers(self):
        seed = int(os.environ.get("NXLOCK_TEST_SEED") or random.randrange(2**32))
        print("\ncrash: seed %d (rerun with NXLOCK_TEST_SEED=%d)" % (seed, seed))
        rng = random.Random(seed)
        self.url = "file://" + self.store_path
        keys = self.pick_keys()
        max_delay = self.max_delay()
        # The window may grow, but stays within a few typical writes (a sanitizer
        # build's start-up alone can take tens of milliseconds).
        delay_cap = 3 * max_delay
        model = {key: None for key in keys}  # the value each key is known to hold
        attempts = landed = confirmed = 0
        took_effect = 0  # kills that landed after the write was done
        start = time.monotonic()

        while landed < KILLS_WANTED and attempts < MAX_ATTEMPTS:
            attempts += 1
            key = rng.choice(keys)
            cmd = rng.choice(["getset", "getset", "setnx", "del"])
            # Unique values; some long ones make the write itself take longer.
            value = b"v%d" % attempts
            if rng.random() < 0.2:
                value += b"." * rng.randrange(1000, 100000)
            args = [cmd, key] if cmd == "del" else [cmd, key, value]
            before = model[key]

            p = self.popen("-u", self.url, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                time.sleep(rng.uniform(0, max_delay))  # a bound: a random instant to kill it at
                p.send_signal(signal.SIGKILL)  # a no-op if it already exited
                out, err = p.communicate(timeout=COMMAND_TIMEOUT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            what = "attempt %d: %s %r %s (before: %s)" % (attempts, cmd, key, short(value),
                                                          short(before))

            # Steer the delay so about half the kills land, whatever the machine's
            # load: a loaded machine (ctest -j, ASan) both slows the writer and
            # makes our sleep overshoot, so a fixed window can miss most writes.
            if p.returncode == -signal.SIGKILL:
                max_delay = min(max_delay * 1.1, delay_cap)
            else:
                max_delay = max(max_delay * 0.9, 0.0002)

            if p.returncode == -signal.SIGKILL:
                landed += 1
                # Killed: the command either took effect entirely or not at all.
                if cmd == "getset":
                    allowed = {before, value}
                elif cmd == "setnx":
                    allowed = {before} if before is not None else {None, value}
                else:
                    allowed = {before, None}
                now = self.read(key)
                self.assertTrue(now in allowed, "%s killed: key holds %s, allowed %s" % (
                    what, short(now), " or ".join(short(a) for a in allowed)))
                if now != before:
                    took_effect += 1
                model[key] = now
                continue

            # Finished by itself: exactly the documented result, and it must stick.
            self.assertIn(p.returncode, (0, 1), "%s: exit %d %r" % (what, p.returncode, err))
            if cmd == "getset":
                expected = (1, b"") if before is None else (0, before + b"\n")
                model[key] = value
            elif cmd == "setnx":
                expected = (0, b"1\n") if before is None else (1, b"0\n")
                if before is None:
                    model[key] = value
            else:
                expected = (1, b"0\n") if before is None else (0, b"1\n")
                model[key] = None
            self.assertTrue((p.returncode, out) == expected, "%s: exit %d stdout %s, expected %s"
                            % (what, p.returncode, short(out), expected))
            if model[key] != before:
                confirmed += 1
            now = self.read(key)
            self.assertTrue(now == model[key], "%s: confirmed write not visible: key holds %s" % (
                what, short(now)))

        elapsed = time.monotonic() - start
        print("crash: %d attempts, %d kills landed (%d after the write took effect),"
              " %d writes confirmed, final delay window 0-%.1f ms, %.1f s" % (
                  attempts, landed, took_effect, confirmed, max_delay * 1000, elapsed))
        self.assertGreaterEqual(landed, KILLS_WANTED,
                                "only %d of %d attempts were killed while running" % (
                                    landed, attempts))
        # Kills must have landed both before and after writes took effect, and some
        # writers must have finished: otherwise the kills missed the writing itself.
        self.assertGreater(took_effect, 0, "no kill landed after a write took effect")
        self.assertLess(took_effect, landed, "every kill landed after the write")
        self.assertGreater(confirmed, 0, "no writer ever finished")

        # Every record left behind parses: every key reads back as the model says,
        # and there is no other record file (data/XY/<16 hex>, one per key here:
        # a deleted key's file goes away) that a get could not reach.
        for key in keys:
            self.assertTrue(self.read(key) == model[key], "final %r" % key)
        files = [path for path in files_under(self.store_path) if path.startswith("data" + os.sep)]
        records = [path for path in files if re.fullmatch(r"[0-9a-f]{16}", os.path.basename(path))]
        present = sum(1 for value in model.values() if value is not None)
        print("crash: %d record files for %d keys present, %d other files under data/" % (
            len(records), present, len(files) - len(records)))
        self.assertEqual(len(records), present, "record files: %s" % sorted(records))

if __name__ == "__main__":
    unittest.main()
