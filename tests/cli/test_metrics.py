"""run-locked --metrics-dir: DIR/nxlock_<key>.prom in the Prometheus text format,
counters that concurrent runs never lose, and a directory that cannot be
written never costs the job."""
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import unittest

from harness import BIN, NxlockTestCase, dying_with_parent, wait_for

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
EXPECTED_TYPES = {
    "nxlock_runs_total": "counter",
    "nxlock_busy_total": "counter",
    "nxlock_lost_total": "counter",
    "nxlock_last_start_time_seconds": "gauge",
    "nxlock_last_end_time_seconds": "gauge",
    "nxlock_last_duration_seconds": "gauge",
    "nxlock_last_exit_status": "gauge",
    "nxlock_last_wait_seconds": "gauge",
    "nxlock_last_jitter_seconds": "gauge",
    "nxlock_running": "gauge",
    "nxlock_failures_total": "counter",
    "nxlock_max_runtime_stops_total": "counter",
    "nxlock_replaced_total": "counter",
}
# What a busy refusal alone writes: the counters, and the gauge of runs now.
FIRST_BUSY = {"nxlock_runs_total": 0, "nxlock_busy_total": 1, "nxlock_lost_total": 0,
              "nxlock_failures_total": 0, "nxlock_max_runtime_stops_total": 0,
              "nxlock_replaced_total": 0, "nxlock_running": 0}


def parse_value(text):
    """A sample value as Go's ParseFloat takes it (the text format's rule)."""
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ValueError("bad value %r" % text)
    return float(text)


def parse_label_value(line, i):
    """The label value starting after the opening quote at line[i]; (value, index past the quote)."""
    value = []
    while True:
        if i >= len(line):
            raise ValueError("unterminated label value: %r" % line)
        c = line[i]
        if c == '"':
            return "".join(value), i + 1
        if c == "\\":
            escaped = line[i + 1:i + 2]
            if escaped not in ("\\", '"', "n"):
                raise ValueError("bad escape in %r" % line)
            value.append("\n" if escaped == "n" else escaped)
            i += 2
        else:
            value.append(c)
            i += 1


def parse_text_format(text):
    """A strict reader of the Prometheus text format (version 0.0.4), as far as
    nxlock's file needs: {(name, ((label, value), ...)): value} and {name: (type, help)}.
    Raises ValueError on anything the format does not allow."""
    if text and not text.endswith("\n"):
        raise ValueError("no newline at the end")
    samples, types, helps, seen_samples = {}, {}, {}, set()
    last_name = None
    for line in text.split("\n")[:-1]:
        if line == "":
            continue
        if line.startswith("#"):
            words = line.split(" ", 3)
            if len(words) >= 3 and words[1] in ("HELP", "TYPE"):
                name = words[2]
                if not METRIC_NAME.fullmatch(name):
                    raise ValueError("bad metric name in %r" % line)
                if words[1] == "TYPE":
                    if name in types or name in seen_samples:
                        raise ValueError("TYPE twice or after samples: %r" % line)
                    if len(words) != 4 or words[3] not in TYPES:
                        raise ValueError("bad TYPE line %r" % line)
                    types[name] = words[3]
                else:
                    if name in helps:
                        raise ValueError("HELP twice: %r" % line)
                    helps[name] = words[3] if len(words) == 4 else ""
            continue
        match = METRIC_NAME.match(line)
        if not match:
            raise ValueError("bad sample line %r" % line)
        name, i = match.group(0), match.end()
        if name != last_name and name in seen_samples:
            raise ValueError("samples of %s not together" % name)
        labels = []
        if line[i:i + 1] == "{":
            i += 1
            while line[i:i + 1] != "}":
                label = LABEL_NAME.match(line, i)
                if not label or line[label.end():label.end() + 2] != '="':
                    raise ValueError("bad label in %r" % line)
                value, i = parse_label_value(line, label.end() + 2)
                labels.append((label.group(0), value))
                if line[i:i + 1] == ",":
                    i += 1
                elif line[i:i + 1] != "}":
                    raise ValueError("bad label list in %r" % line)
            i += 1
        rest = line[i:]
        if not rest.startswith(" "):
            raise ValueError("no space before the value in %r" % line)
        words = rest.split()
        if len(words) not in (1, 2):
            raise ValueError("bad value part in %r" % line)
        if len(words) == 2:
            int(words[1])  # a timestamp: milliseconds, an integer
        key = (name, tuple(labels))
        if key in samples:
            raise ValueError("sample twice: %r" % line)
        samples[key] = parse_value(words[0])
        seen_samples.add(name)
        last_name = name
    return samples, {name: (types.get(name), helps.get(name)) for name in seen_samples}


class ParserSelfTest(unittest.TestCase):
    """The parser above refuses what the format does not allow."""

    def test_it_refuses_bad_input(self):
        for text in ('a{key="x} 1\n', 'a{key="x\\t"} 1\n', "a 1", "a{key=x} 1\n", "1a 1\n",
                     "a one\n", "# TYPE a counter\n# TYPE a counter\na 1\n",
                     "a 1\nb 1\na 2\n", "# TYPE a kounter\n"):
            with self.subTest(text=text):
                with self.assertRaises(ValueError):
                    parse_text_format(text)

    def test_it_reads_escapes(self):
        samples, _ = parse_text_format('a{key="q\\"n\\nb\\\\"} 2.5\n')
        self.assertEqual(samples, {("a", (("key", 'q"n\nb\\'),)): 2.5})


class Metrics(NxlockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_redis()

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.tmp, "metrics")
        os.makedirs(self.dir)

    def metrics(self, name="nxlock_job.prom", key="job"):
        """The file's samples for `key` by metric name, after checking the whole file."""
        with open(os.path.join(self.dir, name)) as f:
            samples, meta = parse_text_format(f.read())
        for metric, (kind, help_text) in meta.items():
            self.assertEqual(kind, EXPECTED_TYPES[metric], metric)
            self.assertTrue(help_text, metric)
        found = {}
        for (metric, labels), value in samples.items():
            self.assertEqual(labels, (("key", key),))
            found[metric] = value
        return found

    def run_locked(self, *args, url_args=()):
        return self.nx(*url_args, "run-locked", "--metrics-dir", self.dir, *args)

    def test_counters_after_runs_and_a_busy_refusal(self):
        for backend in self.backends_named("file", "redis"):
            with self.subTest(backend=backend.name):
                self.dir = os.path.join(self.tmp, "metrics-" + backend.name)
                os.makedirs(self.dir)
                url = backend.args()
                for status in (0, 3):
                    result = self.run_locked("job", "sh", "-c", "exit %d" % status, url_args=url)
                    self.assertEqual(result.returncode, status, result.stderr)
                held = self.nx(*url, "lock", "job")
                self.assertEqual(held.returncode, 0, held.stderr)
                busy = self.run_locked("-n", "job", "true", url_args=url)
                self.assertEqual(busy.returncode, 75, busy.stderr)
                self.nx(*url, "unlock", "--force", "job")

                found = self.metrics()
                self.assertEqual(set(found), set(EXPECTED_TYPES))
                self.assertEqual(found["nxlock_runs_total"], 2)
                self.assertEqual(found["nxlock_busy_total"], 1)
                self.assertEqual(found["nxlock_lost_total"], 0)
                self.assertEqual(found["nxlock_failures_total"], 1)  # the exit 3
                self.assertEqual(found["nxlock_max_runtime_stops_total"], 0)
                self.assertEqual(found["nxlock_replaced_total"], 0)
                self.assertEqual(found["nxlock_running"], 0)
                # The busy refusal leaves the last run's figures.
                self.assertEqual(found["nxlock_last_exit_status"], 3)
                self.assertGreaterEqual(found["nxlock_last_end_time_seconds"],
                                        found["nxlock_last_start_time_seconds"])
                self.assertGreater(found["nxlock_last_start_time_seconds"], 1.6e9)
                self.assertGreaterEqual(found["nxlock_last_duration_seconds"], 0)
                self.assertGreaterEqual(found["nxlock_last_wait_seconds"], 0)
                # Nothing else left in the directory but the file and its lock.
                self.assertEqual(sorted(os.listdir(self.dir)),
                                 [".nxlock_metrics.lock", "nxlock_job.prom"])

    def test_a_busy_refusal_first_writes_only_counters(self):
        self.nx("lock", "job")
        result = self.run_locked("-n", "job", "true")
        self.assertEqual(result.returncode, 75)
        self.assertEqual(self.metrics(), FIRST_BUSY)

    def test_duration_and_wait(self):
        result = self.run_locked("job", "sleep", "0.3")
        self.assertEqual(result.returncode, 0, result.stderr)
        found = self.metrics()
        self.assertGreaterEqual(found["nxlock_last_duration_seconds"], 0.3)
        self.assertLess(found["nxlock_last_duration_seconds"], 10)

    def test_a_lost_lock_is_counted_with_its_status(self):
        result = self.run_locked("-t", "1", "--no-renew", "--kill-after", "0.2", "job",
                                 "sleep", "10")
        self.assertEqual(result.returncode, 79, result.stderr)
        found = self.metrics()
        self.assertEqual(found["nxlock_lost_total"], 1)
        self.assertEqual(found["nxlock_runs_total"], 1)
        self.assertEqual(found["nxlock_last_exit_status"], 79)
        self.assertEqual(found["nxlock_failures_total"], 1)

    def test_a_timed_out_run_records_124(self):
        result = self.run_locked("--max-runtime", "0.2", "job", "sleep", "10")
        self.assertEqual(result.returncode, 124, result.stderr)
        found = self.metrics()
        self.assertEqual(found["nxlock_last_exit_status"], 124)
        self.assertEqual(found["nxlock_max_runtime_stops_total"], 1)
        self.assertEqual(found["nxlock_failures_total"], 1)
        self.assertEqual(found["nxlock_running"], 0)

    def running_now(self, name="nxlock_job.prom", key="job"):
        """The gauge of runs now, None while the file is absent."""
        if not os.path.exists(os.path.join(self.dir, name)):
            return None
        return self.metrics(name, key).get("nxlock_running")

    def test_the_gauge_counts_each_shared_holder_and_slot_while_it_runs(self):
        for backend in self.backends_named("file", "redis"):
            for kind in (("-s",), ("--slots", "3")):
                with self.subTest(backend=backend.name, kind=kind):
                    self.dir = os.path.join(self.tmp, "metrics-%s%s" % (backend.name, kind[0]))
                    os.makedirs(self.dir)
                    go = os.path.join(self.dir, "go")
                    jobs = [self.popen(*backend.args(), "run-locked", "--metrics-dir", self.dir,
                                       *kind, "job", "sh", "-c",
                                       'while [ ! -e "$0" ]; do sleep 0.02; done', go,
                                       stderr=subprocess.PIPE)
                            for _ in range(2)]
                    # The file is written as each job starts, before it ends.
                    self.assertTrue(wait_for(lambda: self.running_now() == 2),
                                    self.running_now())
                    open(go, "w").close()
                    for job in jobs:
                        self.assertEqual(job.wait(timeout=30), 0, job.stderr.read())
                        job.stderr.close()
                    found = self.metrics()
                    self.assertEqual(found["nxlock_running"], 0)
                    self.assertEqual(found["nxlock_runs_total"], 2)

    def test_a_killed_run_stays_in_the_gauge_until_the_next_run(self):
        job = self.popen("run-locked", "--metrics-dir", self.dir, "job", "sleep", "60",
                         stderr=subprocess.DEVNULL)
        self.assertTrue(wait_for(lambda: self.running_now() == 1), self.running_now())
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=30)
        # Its watchdog stops the job and releases the lock; nothing counted it out.
        self.assertTrue(wait_for(lambda: self.nx("lock", "-n", "job").returncode == 0))
        self.nx("unlock", "--force", "job")
        self.assertEqual(self.running_now(), 1)
        # The next run of the key on this host finds it gone and corrects the gauge.
        result = self.run_locked("job", "sh", "-c", "exit 0")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.running_now(), 0)

    @unittest.skipUnless(shutil.which("promtool"), "promtool (Debian's prometheus) is missing")
    def test_promtool_checks_the_file(self):
        for args in (("job", "true"), ("job", "sh", "-c", "exit 2"),
                     ("--max-runtime", "0.1", "job", "sleep", "10")):
            self.run_locked(*args)
        self.nx("lock", "job")
        self.assertEqual(self.run_locked("-n", "job", "true").returncode, 75)
        for name in os.listdir(self.dir):
            if name.endswith(".prom"):
                with open(os.path.join(self.dir, name), "rb") as f:
                    checked = subprocess.run(["promtool", "check", "metrics"], stdin=f,
                                             capture_output=True, timeout=30)
                self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
                self.assertEqual(checked.stdout + checked.stderr, b"")

    def concurrently(self, count, *args):
        processes = [subprocess.Popen(dying_with_parent([BIN, "run-locked", "--metrics-dir",
                                                         self.dir, *args]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      env=self.env)
                     for _ in range(count)]
        errors = [p.communicate(timeout=60)[1] for p in processes]
        return [(p.returncode, err) for p, err in zip(processes, errors)]

    def test_concurrent_runs_lose_no_count(self):
        results = self.concurrently(8, "-w", "50", "job", "sleep", "0.02")
        self.assertEqual([status for status, _ in results], [0] * 8, results)
        self.assertEqual(self.metrics()["nxlock_runs_total"], 8)

        self.nx("lock", "job")
        results = self.concurrently(8, "-n", "job", "true")
        self.assertEqual([status for status, _ in results], [75] * 8, results)
        found = self.metrics()
        self.assertEqual(found["nxlock_runs_total"], 8)
        self.assertEqual(found["nxlock_busy_total"], 8)

    def test_concurrent_runs_on_different_keys_lose_no_count(self):
        def run(key):
            for _ in range(4):
                self.run_locked("-w", "50", key, "true")

        threads = [threading.Thread(target=run, args=("k%d" % i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for i in range(4):
            found = self.metrics("nxlock_k%d.prom" % i, "k%d" % i)
            self.assertEqual(found["nxlock_runs_total"], 4)

    def test_an_unwritable_directory_costs_one_line_not_the_job(self):
        not_a_dir = os.path.join(self.tmp, "file")
        with open(not_a_dir, "w"):
            pass
        marker = os.path.join(self.tmp, "ran")
        for where in (not_a_dir, os.path.join(self.tmp, "missing")):
            with self.subTest(where=where):
                result = self.nx("run-locked", "--metrics-dir", where, "job", "sh", "-c",
                                 'touch "$0"; exit 5', marker)
                self.assertTrue(os.path.exists(marker))
                os.unlink(marker)
                self.assertOneLineError(result, 5, "metrics not written: %s: " % where)
                self.assertNotIn(b".nxlock_metrics.lock", result.stderr)  # ours, not the user's

    def test_keys_that_need_escaping(self):
        key = 'a"b\nc/d\\e f'
        result = self.run_locked(key, "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        name = "nxlock_a%22b%0Ac%2Fd%5Ce%20f.prom"
        self.assertEqual(self.metrics(name, key)["nxlock_runs_total"], 1)

    def test_long_keys_stay_unique_and_short(self):
        keys = ["x" * 300 + "1", "x" * 300 + "2", "/" * 300]
        for key in keys:
            self.assertEqual(self.run_locked(key, "true").returncode, 0)
        names = [n for n in os.listdir(self.dir) if n.endswith(".prom")]
        self.assertEqual(len(names), 3, names)
        for name in names:
            self.assertLess(len(name.encode()), 200)

    def test_the_environment_names_the_directory(self):
        env = dict(self.env, NXLOCK_METRICS_DIR=self.dir)
        result = self.nx("run-locked", "job", "true", env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.metrics()["nxlock_runs_total"], 1)

    def test_an_empty_directory_is_a_usage_error(self):
        result = self.nx("run-locked", "--metrics-dir", "", "job", "true")
        self.assertOneLineError(result, 64, "--metrics-dir")

    def test_verbose_says_the_wait_and_the_hold(self):
        result = self.nx("-v", "run-locked", "job", "sleep", "0.2")
        self.assertEqual(result.returncode, 0, result.stderr)
        err = result.stderr.decode()
        waited = re.search(r"^nxlock: lock 'job' taken after (\d+(\.\d+)?)s of waiting$", err, re.M)
        held = re.search(r"^nxlock: lock 'job' held (\d+(\.\d+)?)s$", err, re.M)
        self.assertTrue(waited, err)
        self.assertTrue(held, err)
        self.assertGreaterEqual(float(held.group(1)), 0.2)
        self.assertTrue(math.isfinite(float(waited.group(1))))


if __name__ == "__main__":
    unittest.main()
