"""A worker's side of the instance's one sync: follow what the sync publishes, hand usage counts back.

Every worker (and the single process of `--workers 1` or of create_app) runs one follower:

- `load()` before the worker listens: every document the sync last published, if any, so a worker that
  starts late (one that replaces a dead worker) serves the instance's current revision from its first
  request. Until something is published the store is empty and every route answers 503.
- `run()` afterwards: woken by the leader after each publish (flagproxy/instance/channel.py `Wakeup`), and
  every `WATCH_SECONDS` anyway (a safety net, and every `POLL_SECONDS` if the wake socket cannot be bound),
  one `stat` of each published file; a new revision is read in a thread and loaded (the image the sync
  compiled, a batch at a time with the loop answering requests from the old snapshot in between, or else the
  document, compiled here) and swapped in. Every `HANDOFF_SECONDS` the usage counted since is written to the
  spool for the sync's usage sender. When the process that started this worker is gone (the main process was
  killed), the worker stops itself rather than serve an ever older snapshot on a port a new instance may want.
- `stop()` when the worker stops: the last handoff, so nothing counted is lost.

`InstanceFollower` is that loop for any product: what it follows (`documents()`, each a `FollowedDocument`:
one published file and what installs it) and how usage is handed off are the product's. `Follower` is the
proxy's: one document into one store, the proxy's usage counts. The edge follows one document per feed
into the snapshot stores of the scopes cut from it (flagproxy/edge/scopes.py).

Every worker loads the same image (or compiles the same bytes) with the same engine, so identical requests
get byte-identical bodies and ETags from every worker, and the store's revision is the sync's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any, TypeVar

import orjson

from flagproxy.instance.channel import Wakeup
from flagproxy.instance.store import (
    ImageError,
    SnapshotStore,
    load_image_steps,
    reads_remote_address_steps,
    release_steps,
    return_free_memory,
)
from flagproxy.sync.publication import Publication, Published
from flagproxy.sync.spool import HANDOFF_SECONDS, UsageSpool
from flagproxy.sync.usage import UsageCollector

WATCH_SECONDS = 1.0  # a look without a wake: a lost datagram costs at most this
POLL_SECONDS = 0.1  # without a wake socket, as before wakes existed
T = TypeVar("T")


def _keep_engine(store: SnapshotStore, published: Published) -> bool:
    """The same engine (flagproxy/image.py's digest): it and the response cache stay, only the features body
    is new (a copy of its bytes: under a millisecond at 5000 flags). False when the image must be loaded."""
    image = published.image
    if image is None:
        return False
    kept = store.install_unchanged(
        image, published.source, revision=published.revision, at_ms=published.published_ms
    )
    return kept is not None


def install_published(store: SnapshotStore, published: Published, logger: Any) -> bool:
    """Swap `published` into `store`: the image the sync compiled, else the document compiled here;
    whether it was installed (a document that does not compile is said and skipped)."""
    if published.image is not None:
        try:
            if not _keep_engine(store, published):
                store.install_image(
                    published.image,
                    published.source,
                    revision=published.revision,
                    at_ms=published.published_ms,
                )
            return True
        except ImageError as exc:
            logger.warn(f"Compiling revision {published.revision} of the features here: {exc}")
    return _compile_published(store, published, logger)


async def install_published_stepwise(store: SnapshotStore, published: Published, logger: Any) -> bool:
    """`install_published` for a worker that is serving: the image is loaded a batch at a time
    (flagproxy/image.py `load_image_steps`, a millisecond or less each), the loop answering the requests
    that came meanwhile from the old snapshot between two batches; its first step (which copies the
    features body out of the file's bytes) runs in a thread. The new body is scanned for remoteAddress a
    piece at a time too (flagproxy/instance/store.py `reads_remote_address_steps`), and the replaced
    snapshot is freed the same way, a list of its objects per loop turn (flagproxy/image.py
    `release_steps`). At 5000 flags a load in one piece held every answer for 10-25 ms at each change,
    freeing the old snapshot 4-10 ms more and the scan 1-2 ms."""
    if published.image is not None:
        try:
            if _keep_engine(store, published):
                return True
            steps = load_image_steps(published.image, store.custom_strategies)
            await asyncio.to_thread(next, steps)
            loaded = await _between_requests(steps)
            remote = await _between_requests(reads_remote_address_steps(loaded.features_body))
            replaced = store.current
            store.install_loaded(
                loaded,
                published.source,
                revision=published.revision,
                at_ms=published.published_ms,
                reads_remote_address=remote,
            )
            del loaded
            # The old engine goes now; the objects it held stay in its parts, freed a list per loop turn.
            parts = list(replaced.parts) if replaced is not None else []
            del replaced
            await _between_requests(release_steps(parts))
            return True
        except ImageError as exc:
            logger.warn(f"Compiling revision {published.revision} of the features here: {exc}")
    return _compile_published(store, published, logger)


async def _between_requests(steps: Generator[None, None, T]) -> T:
    """What `steps` returns, the loop answering requests between two of its steps."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)


def _compile_published(store: SnapshotStore, published: Published, logger: Any) -> bool:
    try:
        payload = orjson.loads(published.document)
        store.install(payload, published.source, revision=published.revision, at_ms=published.published_ms)
    except (ValueError, orjson.JSONDecodeError) as exc:
        logger.error(f"Ignoring revision {published.revision} of the features: {exc}")
        return False
    return True


class FollowedDocument:
    """One published file and what installs its new revisions: `install` before the worker listens,
    `install_serving` (by default `install`) while it serves."""

    def __init__(
        self,
        publication: Publication,
        install: Callable[[Published], bool],
        install_serving: Callable[[Published], Awaitable[bool]] | None = None,
    ) -> None:
        self.publication = publication
        self.install = install
        self.install_serving = install_serving
        self.stamp: tuple[int, int] | None = None  # of the document last installed (or tried)

    @property
    def loaded(self) -> bool:
        return self.stamp is not None

    def load(self) -> bool:
        """Install the published document if it is newer than the last one; whether it did."""
        stamp = self.publication.stamp()
        if stamp is None or stamp == self.stamp:
            return False
        published = self.publication.read()
        if published is None:
            return False
        self.stamp = published.stamp  # a document that does not compile is not retried until replaced
        return self.install(published)

    async def follow(self) -> bool:
        """`load` on a serving loop: the file read in a thread (megabytes at 5000 flags), then installed."""
        stamp = self.publication.stamp()
        if stamp is None or stamp == self.stamp:
            return False
        published = await asyncio.to_thread(self.publication.read)
        if published is None:
            return False
        self.stamp = published.stamp
        if self.install_serving is None:
            return self.install(published)
        return await self.install_serving(published)


class InstanceFollower:
    """The follow loop of one worker: `documents()` watched, `hand_off()` called every HANDOFF_SECONDS and
    at the stop, the main process watched."""

    def __init__(
        self,
        documents: Callable[[], Iterable[FollowedDocument]],
        hand_off: Callable[[], None],
        logger: Any,
        *,
        parent_pid: int | None = None,
        on_orphaned: Callable[[], None] | None = None,
        wake_directory: str | None = None,
    ) -> None:
        self.documents = documents
        self.hand_off = hand_off
        self.logger = logger
        self.parent_pid = parent_pid
        self.on_orphaned = on_orphaned
        self.wake_directory = wake_directory  # the instance folder, where the leader wakes its workers

    def load(self) -> bool:
        """Install every published document newer than what is served; whether any was."""
        installed = False
        for document in list(self.documents()):
            installed = document.load() or installed
        if installed:
            return_free_memory()  # the published file's bytes (megabytes at 5000 flags) are gone by now
        return installed

    async def follow(self) -> bool:
        """`load` while serving: each document read and installed without holding the loop for long."""
        installed = False
        for document in list(self.documents()):
            # A FollowedDocument follows without holding the loop; anything else watched (the edge's
            # revocations) has a `load` only.
            follow = getattr(document, "follow", None)
            installed = (await follow() if follow is not None else document.load()) or installed
        if installed:  # malloc_trim walks the heap without the GIL (ctypes): in a thread, the loop goes on
            await asyncio.to_thread(return_free_memory)
        return installed

    def handed_off(self) -> None:
        """After each periodic hand-off (the proxy reads the sync's last check time then)."""

    async def run(self) -> None:
        wakeup = Wakeup(self.wake_directory) if self.wake_directory is not None else None
        interval = WATCH_SECONDS if wakeup is not None and wakeup.open() else POLL_SECONDS
        loop = asyncio.get_running_loop()
        next_handoff = loop.time() + HANDOFF_SECONDS
        try:
            while True:
                wait = max(0.0, min(interval, next_handoff - loop.time()))
                if wakeup is not None:
                    await wakeup.wait(wait)
                else:
                    await asyncio.sleep(wait)
                try:
                    await self.follow()
                    if loop.time() >= next_handoff:
                        next_handoff = loop.time() + HANDOFF_SECONDS
                        self.hand_off()
                        self.handed_off()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a full disk or a bug must not end following for good
                    self.logger.error(f"Following the instance's sync failed: {exc!r}")
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    self.logger.error("The main process is gone; this worker stops.")
                    if self.on_orphaned is not None:
                        self.on_orphaned()
                    return
        finally:
            if wakeup is not None:
                wakeup.close()

    def handoff_failed(self, exc: BaseException) -> None:
        """A hand-off written on the writer thread (flagproxy/sync/spool.py `later`) failed."""
        self.logger.error(f"Could not hand over usage counts: {exc!r}")

    def stop(self) -> None:
        """The last hand-off, queued: the caller drains the writer (flagproxy/disk.py) before exit."""
        try:
            self.hand_off()
        except OSError as exc:
            self.logger.error(f"Could not hand over the last usage counts: {exc!r}")


class Follower(InstanceFollower):
    """The proxy's: the instance's one document into `store`, the proxy's usage counts into the spool."""

    def __init__(
        self,
        store: SnapshotStore,
        publication: Publication,
        spool: UsageSpool,
        collector: UsageCollector,
        logger: Any,
        *,
        parent_pid: int | None = None,
        on_orphaned: Callable[[], None] | None = None,
        hand_off_usage: bool = True,
        on_usage: Callable[[Any], None] | None = None,
        relayed: Any = None,
    ) -> None:
        self.store = store
        self.publication = publication
        # `--streaming --workers N`: the leader's relayed changes, patched in on each whole revision
        # (flagproxy/instance/relay.py `RelayedChanges`: `based(published)`, `followed`).
        self.relayed = relayed
        self.spool = spool
        self.collector = collector
        self.hand_off_usage = hand_off_usage  # off with metrics off: no sender would ever collect them
        self.on_usage = on_usage  # sees each hand-off's counts first (the per-flag Prometheus series)

        def whole(published: Published) -> bool:
            return self._based(install_published(store, published, logger), published)

        async def whole_serving(published: Published) -> bool:
            return self._based(await install_published_stepwise(store, published, logger), published)

        self.document = FollowedDocument(publication, whole, whole_serving)
        followed = (self.document,) if relayed is None else (self.document, relayed.followed)
        super().__init__(
            lambda: followed,
            self.hand_off_counts,
            logger,
            parent_pid=parent_pid,
            on_orphaned=on_orphaned,
            wake_directory=publication.directory,
        )

    def _based(self, installed: bool, published: Published) -> bool:
        if installed and self.relayed is not None:
            self.relayed.based(published)
        return installed

    def hand_off_counts(self) -> None:
        if not self.hand_off_usage and self.on_usage is None:
            return
        counts = self.collector.take()
        if counts is None:
            return
        if self.on_usage is not None:
            self.on_usage(counts)
        if self.hand_off_usage:
            self.spool.hand_off(counts, later=self.handoff_failed)

    def handed_off(self) -> None:
        self.store.last_fetch_ms = max(self.store.last_fetch_ms, self.publication.last_checked_ms())
