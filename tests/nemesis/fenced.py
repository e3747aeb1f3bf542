"""The fenced resource: a file that accepts a write only when its token is at least the
highest token it has seen, as a storage system that honours fencing tokens would.

Every attempt (accepted or refused) is decided and logged under one flock(2) of the
resource file, so the history lists the attempts in the order the resource decided
them, each with the CLOCK_MONOTONIC time at which it was decided.
"""
import fcntl
import json
import os
import time


class FencedResource:
    """One lock's resource: `path` holds the highest token accepted so far (text)."""

    def __init__(self, path, history_path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.history_fd = os.open(history_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def attempt(self, token, record):
        """Tries a write with `token` (an int, or None when the job got none); logs
        `record` with the decision ("ok") and its time ("t"); returns the decision."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            os.lseek(self.fd, 0, os.SEEK_SET)
            text = os.read(self.fd, 64).strip()
            highest = int(text) if text else None
            accepted = token is not None and (highest is None or token >= highest)
            if accepted and token != highest:
                os.lseek(self.fd, 0, os.SEEK_SET)
                os.ftruncate(self.fd, 0)
                os.write(self.fd, b"%d\n" % token)
            record = dict(record, ok=accepted, highest=highest, t=time.monotonic())
            # One write(2) per line on an O_APPEND descriptor: lines never interleave.
            os.write(self.history_fd, (json.dumps(record) + "\n").encode())
            return accepted
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def note(self, record):
        """Logs a record that is not a write (a section's end), under the same lock."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            record = dict(record, t=time.monotonic())
            os.write(self.history_fd, (json.dumps(record) + "\n").encode())
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
