"""The edge's feeds on the leader's side: each feed's latest document, published once for every worker.

A *feed* is what one client token from `--tokens` (or, with `--dynamic`, a token first seen on a request)
reads upstream: the features of its environment and projects (flagproxy/edge/sync.py), or one
environment of offline mode's bootstrap file (flagproxy/edge/offline.py). The instance's leader (one per
instance, whatever the number of workers: flagproxy/instance/leader.py) compiles each new document once
and publishes it with its image into a file of its own in the instance folder
(flagproxy/sync/publication.py), hands it to the persistence backend (`--backup-folder`, `--redis-url`:
flagproxy/edge/persistence.py), and lists every feed in `feeds.json`.
Workers follow that list and those files (flagproxy/edge/scopes.py), so every worker serves the same
revision of each feed and the upstream is asked once per feed, not once per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
import time
from functools import partial
from typing import Any

import orjson

from flagproxy.disk import disk_writer
from flagproxy.edge.changes import ChangeLog
from flagproxy.edge.tokens import ALL_PROJECTS
from flagproxy.instance.compiler import ImageCompiler
from flagproxy.instance.store import compile_image, return_free_memory
from flagproxy.sync.documents import DocumentError, flag_count, read_document
from flagproxy.sync.publication import Publication

Scope = tuple[str, tuple[str, ...]]  # (environment, sorted projects or ("*",))
INDEX = "feeds.json"
# The longest a stopping leader waits for the clock to reach the last event id it gave out
# (`Feeds.ahead_of_clock`): ids run ahead of it only while changes come faster than one a second (a stream
# brings a burst of ten admin changes in well under a second). Within the test harness's and a
# container's stop timeouts (15 s, 30 s).
AHEAD_WAIT_MAX = 10.0


def scope_name(scope: Scope) -> str:
    return f"{scope[0]}:{','.join(scope[1])}"


def covers(outer: Scope, inner: Scope) -> bool:
    if outer[0] != inner[0]:
        return False
    return ALL_PROJECTS in outer[1] or (ALL_PROJECTS not in inner[1] and set(inner[1]) <= set(outer[1]))


def scope_key(scope: Scope) -> str:
    """A file name part from the scope, never from a token."""
    return hashlib.sha256(scope_name(scope).encode()).hexdigest()[:20]


def feed_file(scope: Scope) -> str:
    return f"feed-{scope_key(scope)}.json"


def events_file(scope: Scope) -> str:
    """The streamed changes relayed on the feed's last whole revision (flagproxy/edge/relayed.py)."""
    return f"events-{scope_key(scope)}.json"


def read_index(directory: str) -> list[Scope] | None:
    """The feeds the leader lists, None before it listed any."""
    try:
        with open(os.path.join(directory, INDEX), "rb") as file:
            listed = orjson.loads(file.read())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return [(str(environment), tuple(projects)) for environment, projects in listed]


def index_stamp(directory: str) -> tuple[int, int] | None:
    try:
        status = os.stat(os.path.join(directory, INDEX))
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_mtime_ns


class Feeds:
    """Every feed's latest document as the leader publishes it; what edge/sync.py and offline.py feed."""

    def __init__(
        self,
        directory: str,
        logger: Any,
        persistence: Any = None,  # flagproxy/edge/persistence.py's Persistence, which imports this module
        *,
        compile_apart: bool = False,
        kept_events: int = 100,
    ) -> None:
        self.directory = directory
        self.logger = logger
        # A leader on a serving loop (`--workers 1`) compiles a served feed's changes in a process of its
        # own (flagproxy/instance/compiler.py), so answers go on from the old snapshot meanwhile.
        self.compiler = ImageCompiler((), logger, apart=lambda: compile_apart)
        self.feeds: dict[Scope, Publication] = {}  # scopes something syncs (hydrated or not)
        self.hydrated: dict[Scope, asyncio.Event] = {}
        self.flags: dict[Scope, int] = {}  # how many flags each feed's latest document holds
        # Each feed's delta log (flagproxy/edge/changes.py), published with its documents.
        self.kept_events = kept_events
        self.changes: dict[Scope, ChangeLog] = {}
        # Feeds kept by streaming (flagproxy/edge/relayed.py): their documents say so, so that only their
        # served scopes keep a whole revision's document for the changes relayed on it.
        self.streamed: set[Scope] = set()
        self.persistence = persistence
        # Features documents refused whole, by reason (flagproxy/sync/documents.py): served at
        # /internal-backstage/metrics as flagproxy_refused_documents_total, as the proxy does.
        self.refused: dict[str, int] = {}
        self._write_index()  # none yet: workers see the leader has started

    def add_feed(self, scope: Scope) -> None:
        if scope in self.feeds:
            return
        self.feeds[scope] = Publication(self.directory, feed_file(scope))
        self.hydrated.setdefault(scope, asyncio.Event())
        self._write_index()

    def _write_index(self) -> None:
        listed = orjson.dumps([[scope[0], list(scope[1])] for scope in self.feeds])
        fd, temporary = tempfile.mkstemp(prefix=".feeds-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(listed)
            os.replace(temporary, os.path.join(self.directory, INDEX))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def publish(
        self, feed: Scope, payload: dict[str, Any], *, source: str = "upstream", save: bool = True
    ) -> bool:
        """A feed's new document, compiled once and published for every worker; False (nothing changes)
        when it is no features document."""
        self.add_feed(feed)
        try:
            image: bytes | None = compile_image(payload, logger=self.logger)
            return_free_memory()  # what the compile freed: the leader serves nothing from it
        except Exception as exc:
            if self._refused(feed, exc):
                return False
            image = None
        return self._published(feed, payload, image, source, save, self.change_log(feed).record(payload))

    async def update(self, feed: Scope, document: bytes, payload: dict[str, Any] | None = None) -> bool:
        """A feed's new document from the upstream (the bytes it sent), as `publish`; once the feed is
        served, compiled apart from a serving loop the leader shares (`compile_apart`). A document of the
        wrong types raises its DocumentError for the feed's poller, which says it once while it lasts.

        The leader parses and checks it here too: the feed's delta log and the persistence are made from
        the parsed document (on the serving loop with one worker: what the proxy spares its loop, the edge
        does not yet), unless `payload` is that document already (a stream's state, checked as it came:
        flagproxy/edge/sync.py)."""
        if payload is None:
            payload = read_document(document)
        if feed not in self.feeds or self.feeds[feed].stamp() is None:
            return self.publish(feed, payload)  # nothing served from it yet: no one waits
        try:
            image = (await self.compiler.compile(document)).image
        except Exception as exc:
            if self._refused(feed, exc):
                return False
            image = None
        # Comparing the document with the last one is tens of milliseconds at 5000 flags: in a thread, so
        # a serving loop the leader shares gets the GIL back between the interpreter's switches.
        log = await asyncio.to_thread(self.change_log(feed).record, payload)
        # Written on the process's writer thread (flagproxy/disk.py), in order with the feeds' check times:
        # the serving loop never waits on the disk; the workers are woken once it is renamed into place.
        event_id = self.change_log(feed).last
        await disk_writer().run(partial(self._write, feed, document, "upstream", image, log))
        return self._done(feed, payload, True, event_id)

    def change_log(self, feed: Scope) -> ChangeLog:
        return self.changes.setdefault(feed, ChangeLog(self.kept_events))

    def _refused(self, feed: Scope, exc: Exception) -> bool:
        """A compile that failed: True when the document is refused (no features document, or of the wrong
        types), False when only the image is missing (the workers compile it themselves: slower, right)."""
        if isinstance(exc, ValueError):
            self.logger.error(f"The features of {scope_name(feed)} could not be used: {exc}")
            if isinstance(exc, DocumentError):
                self.count_refusal(exc.reason)
            return True
        self.logger.warn(f"The workers compile the features of {scope_name(feed)} themselves: {exc!r}")
        return False

    def _published(
        self,
        feed: Scope,
        payload: dict[str, Any],
        image: bytes | None,
        source: str,
        save: bool,
        log: Any,
        document: bytes | None = None,  # the payload's JSON as the upstream sent it, if it came so
    ) -> bool:
        """`log`: the feed's delta log after this document (ChangeLog.record), published with it."""
        self._write(feed, document if document is not None else orjson.dumps(payload), source, image, log)
        return self._done(feed, payload, save, self.change_log(feed).last)

    def _write(self, feed: Scope, document: bytes, source: str, image: bytes | None, log: Any) -> None:
        extra = {"delta": log, "streamed": True} if feed in self.streamed else {"delta": log}
        self.feeds[feed].publish(document, source, image, extra=extra)

    def _done(self, feed: Scope, payload: dict[str, Any], save: bool, event_id: int) -> bool:
        """After a feed's document is published: its count, its readiness, the persistence."""
        self.flags[feed] = flag_count(payload)
        self.hydrated[feed].set()
        if save and self.persistence is not None:
            self.persistence.feed_changed(feed, payload, event_id)
        return True

    def close(self) -> None:
        self.compiler.close()

    def count_refusal(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def touch(self, feed: Scope) -> None:
        """The upstream answered 304 for `feed`."""
        publication = self.feeds.get(feed)
        if publication is not None:
            publication.touch()

    def restore(self, feed: Scope) -> bool:
        """The feed's last saved document from the persistence backend, if there is one."""
        saved = self.persistence.restore_feed(feed) if self.persistence is not None else None
        if saved is None:
            return False
        payload, event_id = saved
        if event_id is not None:  # delta event ids go on from the last run's
            self.change_log(feed).continue_after(event_id)
        return self.publish(feed, payload, source="backup", save=False)

    @property
    def ready(self) -> bool:
        return all(event.is_set() for event in self.hydrated.values())

    def ahead_of_clock(self) -> float:
        """Seconds until the clock reaches the newest event id any feed gave out (at most AHEAD_WAIT_MAX).
        A stopping leader waits them out: the next run, started after that, starts its ids after every id
        of this one even without a backup (flagproxy/edge/changes.py), where a change streamed within the
        second of its hydration had taken an id a second ahead of the clock."""
        last = max((log.last for log in self.changes.values()), default=0)
        return max(0.0, min(AHEAD_WAIT_MAX, last - time.time()))
