"""The compile process of `--workers 1` (flagproxy/instance/compiler.py) leaves no copy of a document in
the serving process: multiprocessing's feeder thread keeps the last message it sent (the pickled document,
4 MB at 5000 flags) until it sends another, so the compiler sends a call that does nothing after each
compile. Checked on a real compile process, by what the serving process's other threads still hold."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import orjson

from benchmarks.datasets import snapshot_payload
from flagproxy.http.logger import make_logger
from flagproxy.instance.compiler import ImageCompiler


def _held_elsewhere(size: int) -> list[str]:
    """Locals of every other thread's frames that are bytes-like and at least `size` bytes long."""
    me = threading.get_ident()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        while frame is not None:
            for name, value in list(frame.f_locals.items()):
                if isinstance(value, bytes | bytearray | memoryview) and memoryview(value).nbytes >= size:
                    found.append(f"{names.get(ident)}: {frame.f_code.co_name}'s {name}")
            frame = frame.f_back
    return found


def test_the_serving_process_keeps_no_copy_of_a_document_it_had_compiled_apart() -> None:
    asyncio.run(_compile_twice())


async def _compile_twice() -> None:
    document = orjson.dumps(snapshot_payload(500))
    compiler = ImageCompiler((), make_logger(None, "warn", False), apart=lambda: True)
    try:
        for _ in range(2):  # the first compile starts the process; the second goes to a running one
            compiled = await compiler.compile(document)
            assert compiled.image is not None and compiled.flags == 500
            deadline = time.monotonic() + 10
            while _held_elsewhere(len(document)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert _held_elsewhere(len(document)) == []
    finally:
        compiler.close()
