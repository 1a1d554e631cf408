"""The process's one writer thread: the periodic file writes of a process that serves, off its loop.

A rename, an `openat(O_TRUNC)`, a `utime` or the first write to a clean page of a shared mmap can wait on
the file system's journal: half a millisecond on a quiet ext4, seconds beside an `npm ci`. The serving loop
never waits on the disk: the sync's upstream check time (flagproxy/sync/publication.py `touch`), its series
and status (flagproxy/proxy/series.py), the request series (flagproxy/http/series.py), the workers' usage
hand-offs (flagproxy/sync/spool.py) and their collection before each usage send, the published documents
(the proxy's, the edge's served feeds'), the relayed streamed changes (flagproxy/instance/relay.py) and
edge's backup folder go to this thread, one at a time, in the order they were asked for, so nothing is
reordered (a document is renamed into place only once written whole, as before) and the prometheus_client
files have one writer per process.

`later(write)` queues and returns at once; `run(write)` is the same for a coroutine that waits for it;
`drain()` waits for everything queued so far (a stop: nothing queued is lost at exit; `drain_now` for a
thread that has no loop, and an exiting interpreter drains too). `Coalesced` is a write of whatever is
latest: asked again while it is queued, it is one write.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

# How long an exiting interpreter waits for what is still queued (a stop drains before that).
EXIT_DRAIN_SECONDS = 10.0


class DiskWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Any] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._work, name="flagproxy-disk", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            write, args, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = write(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, write: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if threading.current_thread() is self._thread:  # a write that asks for another: done in its turn
            try:
                future.set_result(write(*args))
            except BaseException as exc:
                future.set_exception(exc)
            return future
        self._queue.put((write, args, future))
        return future

    def later(
        self, write: Callable[..., Any], *args: Any, failed: Callable[[BaseException], None] | None = None
    ) -> None:
        """Queue `write(*args)`; `failed` (on the writer thread) is told if it raises."""
        future = self.submit(write, *args)
        if failed is not None:

            def told(done: concurrent.futures.Future[Any]) -> None:
                exc = done.exception()
                if exc is not None:
                    failed(exc)

            future.add_done_callback(told)

    async def run(self, write: Callable[..., Any], *args: Any) -> Any:
        """`write(*args)` in its turn; the loop goes on meanwhile."""
        return await asyncio.wrap_future(self.submit(write, *args))

    async def drain(self) -> None:
        """Everything queued so far is written (or failed)."""
        await asyncio.wrap_future(self.submit(_nothing))

    def drain_now(self, timeout: float | None = None) -> None:
        self.submit(_nothing).result(timeout)


def _nothing() -> None:
    return None


class Coalesced:
    """`write()` (which reads the latest state when it runs) queued at most once at a time."""

    def __init__(
        self, write: Callable[[], None], failed: Callable[[BaseException], None] | None = None
    ) -> None:
        self.write = write
        self.failed = failed
        self.queued = 0  # the pid whose writer holds it: a forked child's writer does not

    def ask(self) -> None:
        if self.queued != os.getpid():
            self.queued = os.getpid()
            disk_writer().later(self._run, failed=self.failed)

    def _run(self) -> None:
        self.queued = 0  # before the state is read: a change from here on asks again
        self.write()


_writer: tuple[int, DiskWriter] | None = None
_made = threading.Lock()


def disk_writer() -> DiskWriter:
    """This process's writer (a forked child makes its own)."""
    global _writer
    made = _writer
    if made is not None and made[0] == os.getpid():
        return made[1]
    with _made:
        if _writer is None or _writer[0] != os.getpid():
            writer = DiskWriter()
            _writer = (os.getpid(), writer)
            atexit.register(_drain_at_exit, writer)
        return _writer[1]


def _drain_at_exit(writer: DiskWriter) -> None:
    if _writer is not None and _writer[1] is writer:
        with contextlib.suppress(Exception):  # exiting: nothing left to tell
            writer.drain_now(EXIT_DRAIN_SECONDS)
