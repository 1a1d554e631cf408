"""How one instance's sync hands each features document to every worker: a file, written whole, then renamed.

The sync (the leader: one per instance, whatever the number of workers) calls `publish(document, source,
image)` with the document's bytes as the upstream sent them (checked already, never encoded again here); each
worker's follower is woken (flagproxy/instance/channel.py `wake_workers`), compares `stamp()` (one `stat`)
with the stamp of the last document it read, and calls `read()` when they differ. A rename is atomic, so a
reader sees the old document or the new one, never half of one; every publish makes a new inode, so no change
can look like the last. The file starts with one line of JSON about the document (revision, source, when, its
length), then the document, then (when the sync could make one) the image of the document compiled
(flagproxy/image.py): workers load that instead of compiling (a batch at a time while they serve:
flagproxy/instance/follower.py), and fall back to the document. One file, so the image always belongs to the
document beside it.

A worker that starts late (a replacement for one that died) reads the current file before it listens,
so it serves the instance's current revision at once. `touch()` records an upstream check that changed
nothing (a 304), for the workers' "last fetch" gauge: on the process's writer thread (flagproxy/disk.py),
as the sync may share a serving loop and the loop never waits on the disk.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import orjson

from flagproxy.disk import Coalesced
from flagproxy.instance.channel import wake_workers

DOCUMENT = "snapshot.json"
CHECKED = "checked"


@dataclass(frozen=True)
class Published:
    revision: int
    source: str  # "upstream", "backup" or "bootstrap"
    published_ms: int
    document: bytes | memoryview  # the features document, as JSON
    stamp: tuple[int, int]  # the file's (inode, mtime): what `Publication.stamp()` said when it was read
    image: bytes | memoryview | None = None  # the document compiled, if the sync made it
    extra: Any = None  # what the product published beside the document (edge: the feed's delta log)


class Publication:
    """`name`: the file's name in the folder. The proxy publishes one document (`snapshot.json`); the edge
    one per feed (flagproxy/edge/feeds.py), each with its own file, revisions and upstream check time."""

    def __init__(self, directory: str, name: str = DOCUMENT) -> None:
        self.directory = directory
        self.path = os.path.join(directory, name)
        self.checked_path = os.path.join(directory, CHECKED if name == DOCUMENT else f"{name}.{CHECKED}")
        self.revision = 0  # the leader's count; a restarted leader goes on from the file's
        self._touching = Coalesced(self._touch)  # a failed touch leaves the last check time as it was

    # ---- the leader ---------------------------------------------------------------------------------

    def publish(
        self, document: bytes | memoryview, source: str, image: bytes | None = None, extra: Any = None
    ) -> int:
        """Write `document` (a features document's JSON, as the upstream sent it), and its compiled `image`
        if given, for every worker; returns its revision. `extra` (JSON) goes in the header line, read with
        the document."""
        if self.revision == 0:
            current = self.read()
            self.revision = current.revision if current else 0
        self.revision += 1
        now_ms = int(time.time() * 1000)
        meta = {"revision": self.revision, "source": source, "published_ms": now_ms, "length": len(document)}
        if extra is not None:
            meta["extra"] = extra
        header = orjson.dumps(meta)
        fd, temporary = tempfile.mkstemp(prefix=".snapshot-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(header + b"\n")
                file.write(document)
                if image is not None:
                    file.write(image)
            os.replace(temporary, self.path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
        self._touch()
        wake_workers(self.directory)
        return self.revision

    def touch(self) -> None:
        """The upstream was asked (changed or not): recorded on the writer thread, the loop goes on."""
        self._touching.ask()

    def _touch(self) -> None:
        with open(self.checked_path, "wb"):
            pass
        os.utime(self.checked_path)

    # ---- the workers --------------------------------------------------------------------------------

    def stamp(self) -> tuple[int, int] | None:
        """The current document's (inode, mtime), None before the first publish: cheap enough to ask often."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return None
        return status.st_ino, status.st_mtime_ns

    def read(self) -> Published | None:
        """The current document, or None before the first publish."""
        try:
            with open(self.path, "rb") as file:
                status = os.fstat(file.fileno())
                data = file.read()
        except FileNotFoundError:
            return None
        header, _, _ = data.partition(b"\n")
        meta = orjson.loads(header)
        stamp = (status.st_ino, status.st_mtime_ns)
        # Views, not copies: a 5000-flag document and its image are megabytes each.
        start = len(header) + 1
        end = start + meta.get("length", len(data) - start)
        view = memoryview(data)
        image = view[end:] if len(data) > end else None
        document = view[start:end]
        return Published(
            meta["revision"], meta["source"], meta["published_ms"], document, stamp, image, meta.get("extra")
        )

    def last_checked_ms(self) -> int:
        try:
            return os.stat(self.checked_path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0
