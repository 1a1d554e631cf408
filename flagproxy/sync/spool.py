"""How workers hand their usage counts to the instance's one usage sender: small files in a folder.

Each worker counts in memory (the hot path only adds to a dict) and, every `HANDOFF_SECONDS` and once
more when it stops, writes what it counted since into a file of its own (written whole, then renamed)
and starts again from zero. Before every send the leader `collect()`s: reads each file, adds it to its
bucket and deletes it, so a count belongs to exactly one place at any time (a worker's memory, one
file, or the leader's bucket) and is never sent twice. A worker killed outright (SIGKILL) loses only
what it counted since its last handoff; one stopped by SIGTERM or SIGINT loses nothing.

Files instead of a multiprocessing queue: a worker killed while writing to a queue can leave it locked or
corrupt for everyone; a half-written file here is a temporary name that nobody reads.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import tempfile
from collections.abc import Callable
from typing import Any

import orjson

from flagproxy.disk import disk_writer
from flagproxy.sync.usage import UsageCollector, UsageCounts

HANDOFF_SECONDS = 0.5
SUFFIX = ".usage.json"

Failed = Callable[[BaseException], None]


class UsageSpool:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        # Unique per spool, not only per process: two spools in one process (tests, embedding) or a
        # replacement worker that got a dead one's pid must never write the same file name.
        self._prefix = f"{os.getpid()}-{secrets.token_hex(6)}"
        self._numbers = itertools.count(1)

    def hand_off(self, counts: UsageCounts, later: Failed | None = None) -> None:
        """Write `counts` for the leader (nothing if empty); `later` as `hand_off_document`."""
        if counts:
            self.hand_off_document({"toggles": counts.as_toggles(), "dropped": counts.dropped}, later)

    def hand_off_document(self, document: dict[str, Any], later: Failed | None = None) -> None:
        """Write one hand-off of any product's usage (JSON) for the leader: the proxy's counts
        (`hand_off`), the edge's per-environment counts and registrations (flagproxy/edge/usage.py).
        With `later` (a serving worker: its loop never waits on the disk) the file is written on the
        process's writer thread (flagproxy/disk.py) and `later` is told if that fails; the worker's
        stop drains the writer, so its last hand-off is written before it exits."""
        name = f"{self._prefix}-{next(self._numbers)}{SUFFIX}"
        data = orjson.dumps(document)
        if later is not None:
            disk_writer().later(self._write, name, data, failed=later)
        else:
            self._write(name, data)

    def _write(self, name: str, data: bytes) -> None:
        fd, temporary = tempfile.mkstemp(prefix=".usage-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, os.path.join(self.directory, name))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def collect(self, collector: UsageCollector) -> int:
        """Move every handed-off file into `collector`'s bucket; returns how many there were."""

        def take(handed: dict[str, Any]) -> None:
            collector.counts.merge(handed["toggles"])
            collector.counts.dropped += handed["dropped"]

        return self.collect_documents(take)

    def collect_documents(self, take: Callable[[dict[str, Any]], None]) -> int:
        """Hand every handed-off document to `take`, deleting its file first; how many there were."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(SUFFIX))
        except FileNotFoundError:
            return 0
        for name in names:
            path = os.path.join(self.directory, name)
            try:
                with open(path, "rb") as file:
                    handed: dict[str, Any] = orjson.loads(file.read())
                # Deleted before it is counted: a leader that dies in between loses it, but never
                # sends it twice.
                os.unlink(path)
            except (FileNotFoundError, orjson.JSONDecodeError):
                continue
            take(handed)
        return len(names)
