"""Where the instance's sync compiles a features document into the image every worker loads: in a process
of its own when the sync shares its process with a serving loop.

Compiling 5000 flags is about half a second of pure Python. `flagproxy proxy --workers 1` (and create_app)
runs the sync on the loop that answers requests, so compiling there stalled every answer for that long, on
every change. A thread would not help: the compiler holds the GIL for all but a few instructions, so the
serving loop would only get the GIL back between the interpreter's 5 ms switches, with the compile running
the whole time. A process of its own runs the compile on another core while the loop keeps answering from
the old snapshot; the image comes back as bytes and is published as before (flagproxy/sync/publication.py),
and the follower swaps it in (flagproxy/instance/follower.py), so requests see the old snapshot or the new
one, and only the load of the image (tens of milliseconds at 5000 flags) runs on the loop.

The process is started once, on the first compile while the loop serves (the first document, before anything
is served, compiles here: no one waits for it), by `spawn` (a fork of a serving process would copy its
threads' locks), lives as long as the instance, ignores SIGINT (the serving process decides when to stop)
and dies with it. It gets the document as JSON bytes and custom strategies by name only: an image refers to
them by name (flagproxy/image.py), so the worker loading it binds its own. If the process dies, that
document is compiled in this process instead and the next one starts a new process.

`--workers N` compiles in the main process's sync thread, which serves nothing: no second process there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from flagproxy.instance.store import Compiled, compile_document, return_free_memory


class _Named:
    """A custom strategy as the compiler sees it in the compile process: its name (never called there)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def is_enabled(self, parameters: Any, context: Any) -> bool:  # pragma: no cover - never called
        return False


class _Warnings:
    """The compile process's logger: what it would have said, handed back to be logged here."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def warning(self, message: str) -> None:
        self.said.append(message)

    warn = warning


def _die_with_parent() -> None:
    """Linux: the compile process gets SIGKILL when the process that started it is gone."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# How much less than the serving process the compile asks of the CPU (nice(2)): on a machine with as many
# busy threads as cores, a compile at the same priority took a core from the requests for its whole length.
COMPILE_NICENESS = 10


def _start_compile_process() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    with contextlib.suppress(OSError):
        os.nice(COMPILE_NICENESS)


def _lower_this_thread() -> None:
    """Linux: a thread has a nice value of its own (setpriority on its thread id)."""
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + COMPILE_NICENESS)


def _compile_document(document: bytes, strategy_names: Sequence[str]) -> tuple[Compiled, list[str]]:
    """In the compile process: `document` compiled (flagproxy/instance/store.py) and its warnings."""
    warnings = _Warnings()
    strategies = [_Named(name) for name in strategy_names]
    compiled = compile_document(document, custom_strategies=strategies, logger=warnings)
    return_free_memory()
    return compiled, warnings.said


class ImageCompiler:
    """`await compile(document)`: the bytes of a features document, as the upstream sent them, checked and
    compiled into the image every worker loads (`Compiled`), apart from the serving loop when `apart()`
    says so (something is being served), else here. Raises DocumentError for bytes that are no features
    document (no JSON, or of the wrong types) and what `compile_document` raises."""

    def __init__(self, custom_strategies: Sequence[Any], logger: Any, *, apart: Callable[[], bool]) -> None:
        self.custom_strategies = tuple(custom_strategies)
        self.logger = logger
        self.apart = apart
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None

    def _here(self, document: bytes) -> Compiled:
        compiled = compile_document(document, custom_strategies=self.custom_strategies, logger=self.logger)
        return_free_memory()  # what the compile freed: the sync's process serves nothing from it
        return compiled

    async def _in_thread(self, document: bytes) -> Compiled:
        """In this process, in a thread of its own at COMPILE_NICENESS: the sync's loop (the leader's, which
        also answers the edge workers' questions) is not held for the whole compile, and the workers and
        the load on the machine go first."""
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="flagproxy-compile", initializer=_lower_this_thread
            )
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._here, document)

    async def compile(self, document: bytes) -> Compiled:
        if not self.apart():
            return await self._in_thread(document)
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_compile_process,
            )
        names = [strategy.name for strategy in self.custom_strategies]
        try:
            compiled, warnings = await asyncio.get_running_loop().run_in_executor(
                self._pool, _compile_document, bytes(document), names
            )
        except concurrent.futures.BrokenExecutor as exc:
            self.logger.warn(f"The compile process stopped ({exc!r}); compiling this document here")
            self.close()
            return await self._in_thread(document)
        for warning in warnings:
            self.logger.warn(warning)
        return compiled

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=False, cancel_futures=True)
