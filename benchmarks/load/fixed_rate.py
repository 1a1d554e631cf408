"""Latency at a fixed request rate: the p99 of a target's answers when requests leave on a schedule.

wrk is a closed loop (each connection sends its next request when the last answer is in), so a slower
server is sent fewer requests and its percentiles describe another load than a faster one's; wrk2's
constant-rate mode is not installed here. This client sends `rate` requests a second on a fixed schedule
over `connections` keep-alive connections (asyncio streams, one process) and times each request from the
moment it was due, not from when a connection was free: time spent waiting behind a slow answer counts
(no coordinated omission). Two targets are loaded at the same rate in alternating runs (A B B A ...), so
their p99 compare like for like (issue 25: `POST /proxy` p99 within 1.5x of the ceiling's).
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import secrets
import time
from dataclasses import dataclass, field

from benchmarks.load.scenarios import Workload


@dataclass
class Latencies:
    """One target's latencies (seconds) over its runs, and its failures (wrong status, dropped connection)."""

    name: str
    seconds: list[float]
    failed: int = 0
    runs: list[list[float]] = field(default_factory=list)  # the same latencies, run by run

    def percentile(self, p: float) -> float | None:
        return _percentile(self.seconds, p)

    def run_percentiles(self, p: float) -> list[float | None]:
        """The p-th percentile of each run, in the order they ran."""
        return [_percentile(run, p) for run in self.runs]


def _percentile(seconds: list[float], p: float) -> float | None:
    if not seconds:
        return None
    ordered = sorted(seconds)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _requests(workload: Workload, host: str, path: str, count: int) -> list[bytes]:
    """`count` requests as they go on the wire: a new userId each for a unique workload, else rotated."""
    scenario = workload.scenario
    line = f"{scenario.method} {path}"
    head = f" HTTP/1.1\r\nHost: {host}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in workload.headers.items()
    )
    tag = secrets.token_hex(4)
    out = []
    for i in range(count):
        request = workload.nth(i, f"fixed-{tag}-")
        query, body = request.query, request.body
        lines = line + query + head
        if body is not None:
            lines += f"Content-Length: {len(body)}\r\n"
        out.append(lines.encode() + b"\r\n" + (body or b""))
    return out


async def _answer(reader: asyncio.StreamReader) -> int:
    """Reads one answer (Content-Length bodies only, as the targets send); returns its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _run(
    port: int, requests: list[bytes], rate: float, connections: int, expected: int, into: Latencies
) -> None:
    free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(connections):
        free.put_nowait(await asyncio.open_connection("127.0.0.1", port))
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05

    async def one(due: float, request: bytes) -> None:
        reader, writer = await free.get()
        try:
            writer.write(request)
            status = await _answer(reader)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            into.failed += 1
            free.put_nowait(await asyncio.open_connection("127.0.0.1", port))
            return
        into.seconds.append(loop.time() - due)
        if status != expected:
            into.failed += 1
        free.put_nowait((reader, writer))

    # Each request's task is made when it is due, not all at once: making a run's thousands of tasks up
    # front held the client's loop for a few hundred ms at the start, so its first requests left late and
    # that lateness, the client's own, was counted against the target (a burst at every run's start).
    # Only the requests still waiting are held. A list of every request's task kept a run's tens of
    # thousands of finished tasks alive to its end, so the client's garbage collector ran (10 s at 2,361
    # req/s) 220 young and 20 middle passes and one full pass of 26-37 ms: a pause of the client's that
    # counted against the target it was loading (the ceiling's p99 2.3-2.7 ms with it, 1.5-1.6 without).
    pending: set[asyncio.Future[None]] = set()
    for i, request in enumerate(requests):
        due = start + i / rate
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        task = asyncio.ensure_future(one(due, request))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    while not free.empty():
        free.get_nowait()[1].close()


def measure(
    targets: list[tuple[str, int, str, Workload]],
    rate: float,
    seconds: float,
    rounds: int = 2,
    connections: int = 32,
    cpus: set[int] | None = None,
) -> list[Latencies]:
    """Each (name, port, path, workload) loaded at `rate` requests a second for `seconds`, `rounds` times,
    alternating between the targets (A B, B A, ...); the latencies of a target's rounds together. `cpus`:
    the CPUs this client runs on meanwhile (by default wherever the scheduler puts it)."""
    found = [Latencies(name, []) for name, *_ in targets]
    count = max(1, round(rate * seconds))
    before = os.sched_getaffinity(0)
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        _alternate(targets, rate, rounds, connections, count, found)
    finally:
        os.sched_setaffinity(0, before)
    return found


def _alternate(
    targets: list[tuple[str, int, str, Workload]],
    rate: float,
    rounds: int,
    connections: int,
    count: int,
    found: list[Latencies],
) -> None:
    for number in range(rounds):
        order = range(len(targets)) if number % 2 == 0 else reversed(range(len(targets)))
        for index in order:
            _name, port, path, workload = targets[index]
            requests = _requests(workload, f"127.0.0.1:{port}", path, count)
            before = len(found[index].seconds)
            gc.collect()  # the last run's garbage collected now, not during this one
            asyncio.run(
                _run(port, requests, rate, connections, workload.scenario.expected_status, found[index])
            )
            found[index].runs.append(found[index].seconds[before:])
            time.sleep(0.5)
