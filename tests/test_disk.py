"""The process's writer thread (flagproxy/disk.py): writes run in the order asked, off the calling thread;
`drain` waits for all of them; a `Coalesced` write asked many times while queued runs once, with the latest
state; a failure is told and the next write goes on."""

from __future__ import annotations

import asyncio
import threading
import time

from flagproxy.disk import Coalesced, disk_writer


def test_writes_run_in_order_off_the_caller_and_drain_waits_for_them():
    done: list[tuple[int, str]] = []
    gate = threading.Event()

    async def scenario() -> float:
        writer = disk_writer()
        writer.later(gate.wait, 5)  # a slow disk
        for n in range(5):
            writer.later(lambda n=n: done.append((n, threading.current_thread().name)))
        started = time.monotonic()
        await asyncio.sleep(0.05)  # the loop goes on meanwhile
        assert done == []
        gate.set()
        await writer.drain()
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 5
    assert [n for n, _ in done] == [0, 1, 2, 3, 4]
    assert {name for _, name in done} == {"flagproxy-disk"}


def test_a_coalesced_write_runs_once_with_the_latest_state_and_failures_are_told():
    gate = threading.Event()
    state = {"value": 0}
    written: list[int] = []
    failures: list[BaseException] = []
    writer = disk_writer()
    writer.later(gate.wait, 5)
    coalesced = Coalesced(lambda: written.append(state["value"]))
    for value in range(1, 10):
        state["value"] = value
        coalesced.ask()
    writer.later(lambda: 1 / 0, failed=failures.append)
    gate.set()
    writer.drain_now(5)
    assert written == [9]
    assert isinstance(failures[0], ZeroDivisionError)
    coalesced.ask()  # asked again after it ran: written again
    writer.drain_now(5)
    assert written == [9, 9]
