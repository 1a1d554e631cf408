"""Many idle `/api/client/streaming` connections in one process, cheaply: raw asyncio protocols, no HTTP
library, nothing kept of the hydration but whether it ended. For benchmarks/fanout.py.

    python -m benchmarks.fanout_client --port P --token T --streams N

Opens N streams (at most --opening at a time), then writes one JSON line `{"connected": n, "failed": f}`.
It then waits for a line on stdin (the harness made its change) and for every stream's first
`unleash-updated` event (or --wait seconds), and writes `{"arrivals": [wall-clock seconds, ...]}` (one per
stream that got it) before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import resource
import sys
import time


class Stream(asyncio.Protocol):
    """One SSE connection: knows when its first event (unleash-connected) ended, and when the first
    `unleash-updated` after it arrived."""

    hydrated = False  # its first event has ended
    ended_in_newline = False  # the last chunk read ended in \n (the next may complete a \n\n)
    buffer = b""  # what came after the hydration, until the update

    def __init__(
        self, request: bytes, connected: asyncio.Future[bool], updated: asyncio.Future[float]
    ) -> None:
        self.request = request
        self.connected = connected
        self.updated = updated

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if not self.hydrated:
            # The hydration is one line of JSON: its event ends at the first blank line (the headers end in
            # \r\n\r\n, which has no two \n in a row). A chunk may split the \n\n.
            if self.ended_in_newline and data.startswith(b"\n"):
                rest = data[1:]
            else:
                end = data.find(b"\n\n")
                if end < 0:
                    self.ended_in_newline = data.endswith(b"\n")
                    return
                rest = data[end + 2 :]
            self.hydrated = True
            if not self.connected.done():
                self.connected.set_result(b"fetch-mode" not in data)
            data = rest
        if self.updated.done():
            return
        self.buffer += data
        while b"\n\n" in self.buffer:
            event, self.buffer = self.buffer.split(b"\n\n", 1)
            if event.startswith(b"event: unleash-updated") or b"\nevent: unleash-updated" in event:
                self.updated.set_result(time.time())
                self.buffer = b""
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_result(False)


async def open_stream(port: int, request: bytes, gate: asyncio.Semaphore) -> asyncio.Future[float] | None:
    """A hydrated stream's future arrival of the change; None when refused (or reset) three times, as a
    client retries (the listening socket's backlog overflows while thousands connect at once)."""
    loop = asyncio.get_running_loop()
    for attempt in range(3):
        connected: asyncio.Future[bool] = loop.create_future()
        updated: asyncio.Future[float] = loop.create_future()
        async with gate:
            try:
                protocol = functools.partial(Stream, request, connected, updated)
                await loop.create_connection(protocol, "127.0.0.1", port)
                if await asyncio.wait_for(connected, 120):
                    return updated
            except (OSError, TimeoutError):
                pass
        await asyncio.sleep(0.5 * (attempt + 1))
    return None


async def main_async(args: argparse.Namespace) -> None:
    request = (
        f"GET /api/client/streaming HTTP/1.1\r\nHost: 127.0.0.1:{args.port}\r\n"
        f"Authorization: {args.token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    gate = asyncio.Semaphore(args.opening)
    opened = await asyncio.gather(*(open_stream(args.port, request, gate) for _ in range(args.streams)))
    streams = [s for s in opened if s is not None]
    print(json.dumps({"connected": len(streams), "failed": args.streams - len(streams)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    done, _ = await asyncio.wait(streams, timeout=args.wait)
    print(json.dumps({"arrivals": sorted(s.result() for s in done)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--opening", type=int, default=100, help="connections being opened at once (100)")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the change (60)")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
