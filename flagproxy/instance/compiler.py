"""Where the instance's sync turns a features document, as the bytes the upstream sent, into what every
worker loads: parsed, checked whole (flagproxy/sync/documents.py) and compiled into an image
(flagproxy/instance/store.py `compile_document`), in a process of its own when the sync shares its process
with a serving loop, else in a thread of its own.

Parsing (about 35 ms at 5000 flags), checking (45 ms) and compiling (about 0.4 s) are pure Python or hold
the GIL. `flagproxy proxy --workers 1` (and create_app) runs the sync on the loop that answers requests, so
doing any of it there stalled every answer for that long, on every change; a thread would not help, as it
would hold the GIL against the loop. A process of its own gets the bytes, does all three on another core
while the loop keeps answering from the old snapshot, and sends the image back; the sync publishes the
bytes it got with it (flagproxy/sync/publication.py), and the follower loads the image between requests
(flagproxy/instance/follower.py). The serving process never parses a whole document.

The process is started once, on the first compile (the first document too: compiled in the serving process,
the parsed document and the model would leave its arenas holding megabytes it never uses again), by `spawn` (a
fork of a serving process would copy its threads' locks), lives as long as the instance, ignores SIGINT (the
serving process decides when to stop), dies with it, and runs at COMPILE_NICENESS: on a machine whose cores
are all busy (the serving loop, a load generator, other work) a compile at the same priority took a core from
the requests for its whole length; niced, it takes what they leave, and a change is served a little later
instead of every answer being slower meanwhile. Custom strategies go by name only: an image refers to them by
name (flagproxy/image.py), so the worker loading it binds its own. If the process dies, that document is
compiled in the thread instead and the next one starts a new process.

`--workers N` compiles in the main process, which serves nothing, in a thread at COMPILE_THREAD_NICENESS (5),
so the leader's loop (which also answers the edge workers' questions) keeps turning. Less niced than the
process of `--workers 1`: there the single worker leaves a core to the compile, here N workers and the
load can hold every core, and at nice 10 no change was served while they did.
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
# The same for `--workers N`, whose compile thread shares the cores with N serving workers: at nice 10 its
# CFS weight is a tenth of one worker's, so with every core busy (the workers and a load generator) a 0.4 s
# compile took some 10 s and no change was served while the load lasted (benchmarks/README.md). At nice 5
# (a third of a worker's weight) it takes about 15 % of a core from the workers meanwhile and a change is
# served within a few seconds; at 0 it would take a worker's share.
COMPILE_THREAD_NICENESS = 5


def _start_compile_process() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    with contextlib.suppress(OSError):
        os.nice(COMPILE_NICENESS)


def _lower_this_thread() -> None:
    """Linux: a thread has a nice value of its own (setpriority on its thread id)."""
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + COMPILE_THREAD_NICENESS)


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
        """In this process, in a thread of its own at COMPILE_THREAD_NICENESS: the sync's loop (the
        leader's, which also answers the edge workers' questions) is not held for the whole compile, and
        the workers and the load on the machine go first."""
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
        self._let_go_of_the_document()
        for warning in warnings:
            self.logger.warn(warning)
        return compiled

    def _let_go_of_the_document(self) -> None:
        """The pool's feeder thread (multiprocessing.queues) keeps the last message it sent until it sends
        another: here the pickled document in its BytesIO, 4 MB at 5000 flags held for as long as no change
        comes, in the one process of `--workers 1`. A call that does nothing is that other message."""
        if self._pool is not None:
            with contextlib.suppress(RuntimeError, concurrent.futures.BrokenExecutor):
                self._pool.submit(int)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=False, cancel_futures=True)
