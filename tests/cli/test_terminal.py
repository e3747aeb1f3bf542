"""Waiting on a terminal: one status line on stderr, erased once the lock is acquired."""
import os
import pty
import select
import subprocess
import time
import unittest

from harness import NxlockTestCase, BIN, dying_with_parent


def read_until(fd, needle, timeout):
    """Reads a pty master until `needle` shows up or `timeout` passes; returns all read."""
    data = b""
    deadline = time.monotonic() + timeout
    while needle not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data += os.read(fd, 4096)
            except OSError:  # EIO: the last writer closed the terminal
                break
    return data


class Terminal(NxlockTestCase):
    def hold(self):
        r = self.nx("lock", "-t", "30", "job")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().strip()

    def test_status_line_while_waiting_then_erased(self):
        value = self.hold()
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        waiter = subprocess.Popen(dying_with_parent([BIN, "lock", "-w", "20", "job"]),
                                  env=self.env, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        shown = read_until(master, b"waited 1s", timeout=10)
        line = shown.decode(errors="replace")
        self.assertIn("\rnxlock: waiting for 'job'", line)
        self.assertIn("held by pid %d" % os.getpid(), line)
        self.assertRegex(line, r", \d+s left, waited 1s")
        self.assertNotIn("\n", line, "one line, rewritten in place")

        self.assertEqual(self.nx("unlock", "job", value).returncode, 0)
        self.assertEqual(waiter.wait(timeout=10), 0)
        rest = read_until(master, b"\x00", timeout=1)  # whatever came after, until EOF
        self.assertTrue(rest.endswith(b"\r\x1b[K"), rest)  # erased: cursor back, line cleared
        self.assertTrue(waiter.stdout.read().strip().isdigit())
        waiter.stdout.close()

    def test_nothing_when_stderr_is_not_a_terminal(self):
        value = self.hold()
        waiter = self.popen("lock", "-w", "20", "job", stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        time.sleep(1.5)  # a bound: long enough for the terminal line's first refresh
        self.assertEqual(self.nx("unlock", "job", value).returncode, 0)
        out, err = waiter.communicate(timeout=10)
        self.assertEqual(waiter.returncode, 0)
        self.assertEqual(err, b"")

    def test_quiet_silences_the_status_line(self):
        value = self.hold()
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        waiter = subprocess.Popen(dying_with_parent([BIN, "-q", "lock", "-w", "20", "job"]),
                                  env=self.env, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        shown = read_until(master, b"waiting", timeout=1.5)
        self.assertEqual(self.nx("unlock", "job", value).returncode, 0)
        self.assertEqual(waiter.wait(timeout=10), 0)
        self.assertEqual(shown + read_until(master, b"\x00", timeout=1), b"")


if __name__ == "__main__":
    unittest.main()
