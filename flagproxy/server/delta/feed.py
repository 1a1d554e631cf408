"""Each server process's feed: new events from the database, handed to the process's open streams.

The database is the source of truth. A change committed through any process (a worker of `--workers N`,
or another server on the same PostgreSQL) reaches every process: on PostgreSQL through `LISTEN`, the
change's transaction sending `NOTIFY` as it commits (and a read every few seconds, should a notification
be lost while the listening connection reconnects); on SQLite by reading the event table's index every
0.1 s. A change made by this process wakes its feed at once.

The feed reads each new revision's events once and hands the same objects to every open stream
(flagproxy/http/delta.py `Streams`), which picks what its token may see; one that falls behind catches up
from the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from flagproxy.http.delta import Batch, Streams
from flagproxy.server.delta.events import parse
from flagproxy.server.storage import delta as delta_rows
from flagproxy.server.storage import revision
from flagproxy.server.storage.database import Database

log = logging.getLogger("flagproxy.server")

SQLITE_POLL_SECONDS = 0.1
POSTGRES_POLL_SECONDS = 5.0
LISTEN_RETRY_SECONDS = 1.0
LISTEN_WAIT_SECONDS = 0.5  # how long one wait for notifications lasts: a stop waits at most this long


class DeltaFeed(Streams):
    """New events for this process's streams; at most `max_streams` of them at once."""

    def __init__(self, database: Database, max_streams: int) -> None:
        super().__init__(max_streams)
        self.database = database
        self.position = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def wake(self) -> None:
        """A change was committed by this process: read it now rather than at the next poll."""
        self._wake.set()

    def start(self) -> None:
        with self.database.transaction(read_only=True) as tx:
            self.position = revision.current(tx)
        self._tasks.append(asyncio.create_task(self._follow(), name="delta-feed"))
        url = getattr(self.database, "url", None)
        if self.database.dialect == "postgres" and url:
            self._tasks.append(asyncio.create_task(self._listen(url), name="delta-listen"))

    async def stop(self) -> None:
        """End every open stream (their handlers finish their responses) and stop reading."""
        self.stop_streams()
        for task in self._tasks:
            if task.get_name() != "delta-listen":  # it ends by itself within LISTEN_WAIT_SECONDS
                task.cancel()
        # Bounded: a stop must never wait on the database (the listener's connection dies with us).
        done, pending = await asyncio.wait(self._tasks, timeout=LISTEN_WAIT_SECONDS + 2)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("delta feed: %s ended with %r", task.get_name(), task.exception())
        for task in pending:
            log.warning("delta feed: %s did not end in time; left behind", task.get_name())
        self._tasks.clear()

    async def _follow(self) -> None:
        interval = SQLITE_POLL_SECONDS if self.database.dialect == "sqlite" else POSTGRES_POLL_SECONDS
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            self._wake.clear()
            try:
                self.pull()
            except Exception:  # a database outage must not end the feed; the next turn retries
                log.exception("delta feed: reading new events failed")
                await asyncio.sleep(interval)

    def pull(self) -> None:
        """Read the events after the feed's position and hand them to every stream."""
        with self.database.transaction(read_only=True) as tx:
            rows = delta_rows.events_after(tx, self.position)
            window = delta_rows.floor(tx) if rows else None
        if not rows:
            return
        batch = Batch(parse(rows), int(rows[-1]["event_id"]))
        missed = window is not None and self.position < window
        self.position = batch.upto
        if missed:  # older events were dropped before this process read them: streams catch up
            self.fell_behind()
        else:
            self.offer(batch)

    async def _listen(self, url: str) -> None:
        import psycopg

        # Never cancelled: psycopg answers the cancellation of a wait for notifications by asking the server
        # to cancel a query and waiting for it to end, which a LISTEN never does, so a stop hung until
        # SIGKILL. Instead each wait ends after LISTEN_WAIT_SECONDS and the loop looks at `stopping`.
        while not self.stopping:
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
                    await connection.execute(f"LISTEN {delta_rows.NOTIFY_CHANNEL}")
                    self._wake.set()  # whatever was committed while not listening
                    while not self.stopping:
                        async for _ in connection.notifies(timeout=LISTEN_WAIT_SECONDS):
                            self._wake.set()
            except Exception as exc:
                if self.stopping:
                    return
                log.warning("delta feed: listening on PostgreSQL failed (%s); retrying", exc)
                await asyncio.sleep(LISTEN_RETRY_SECONDS)
