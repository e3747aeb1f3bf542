"""A scenario's history: one JSON object a line, appended by the jobs (their fenced writes,
under the resource's flock), the clients (each nxlock run and its exit status) and the
nemesis (each fault). Every record has "ev" and "t", a CLOCK_MONOTONIC time.
"""
import json
import os
import threading
import time


class History:
    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.lock = threading.Lock()
        self.follow_offset = 0
        self.follow_tail = b""
        self.open_sections = {}  # section id -> its start record, for the nemesis

    def append(self, record):
        """Appends `record` (with "t" = now unless it has one) as one line."""
        record = dict(record)
        record.setdefault("t", time.monotonic())
        with self.lock:
            os.write(self.fd, (json.dumps(record) + "\n").encode())

    def records(self):
        """Every record so far; a torn last line (a writer killed mid-write) is skipped."""
        found = []
        with open(self.path, "rb") as f:
            for line in f:
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return found

    def follow(self):
        """Reads the records appended since the last call and keeps track of the sections
        that started and have not ended; returns those open sections' start records."""
        with open(self.path, "rb") as f:
            f.seek(self.follow_offset)
            chunk = f.read()
        self.follow_offset += len(chunk)
        lines = (self.follow_tail + chunk).split(b"\n")
        self.follow_tail = lines.pop()
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("ev") == "start":
                self.open_sections[record["section"]] = record
            elif record.get("ev") == "end":
                self.open_sections.pop(record.get("section"), None)
        return list(self.open_sections.values())

    def close(self):
        os.close(self.fd)
