"""A stub upstream that also streams (`GET /api/client/streaming`, Unleash's server-sent events), for the
faults a real `flagproxy server` is never made to show: a stream refused with a status, a `fetch-mode` hint,
a polled answer offering streaming, a stream that ends, an event that cannot be read.

Each connection is recorded (with its `Last-Event-ID`) like every other request; `stream_status` answers
it with that status instead; otherwise it gets `connected` (the `unleash-connected` document and its id, as
the stub's state says at the time), then whatever `push` sends, until `end_streams()` closes them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tests.http.loopback import LoopThread, StubUpstream

WAIT = 30.0  # how long a streamed change may take to show before a test fails (never a measured bound)


def eventually(check: Callable[[], Any], what: str, wait: float = WAIT) -> Any:
    """`check()`'s first true answer, asked every 50 ms; fails naming `what` after `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        answer = check()
        if answer:
            return answer
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def sse(event: str, data: Any, event_id: int | None = None) -> bytes:
    text = data if isinstance(data, bytes) else orjson.dumps(data)
    head = b"event: " + event.encode() + b"\n"
    if event_id is not None:
        head += b"id: %d\n" % event_id
    return head + b"data: " + text + b"\n\n"


class StreamingStub(StubUpstream):
    def __init__(self, loop: LoopThread, payload: dict[str, Any]) -> None:
        self.stream_status = 200
        self.stream_headers: dict[str, str] = {}
        self.connected: bytes | None = None  # the first event of a connection; None: a hydration of payload
        self.event_id = 1
        self.streams_started = 0  # connections that got as far as their queue (push reaches them)
        self._streams: list[asyncio.Queue[bytes | None]] = []
        super().__init__(loop, payload)

    def hydration(self) -> bytes:
        events = [{"eventId": self.event_id, "type": "hydration", **self.payload}]
        return sse("unleash-connected", {"events": events}, self.event_id)

    async def _streaming(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        if self.stream_status != 200:
            return web.Response(status=self.stream_status, text="no stream here", headers=self.stream_headers)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **self.stream_headers})
        await response.prepare(request)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams.append(queue)
        self.streams_started += 1
        try:
            await response.write(self.connected if self.connected is not None else self.hydration())
            while (chunk := await queue.get()) is not None:
                await response.write(chunk)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._streams.remove(queue)
        return response

    def push(self, chunk: bytes) -> None:
        """Send `chunk` on every open stream."""
        for queue in list(self._streams):
            self.loop.loop.call_soon_threadsafe(queue.put_nowait, chunk)

    def end_streams(self) -> None:
        for queue in list(self._streams):
            self.loop.loop.call_soon_threadsafe(queue.put_nowait, None)

    async def _features(self, request: web.Request) -> web.Response:
        response = await super()._features(request)
        response.headers.update(self.features_headers if response.status == 200 else {})
        return response

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/api/client/features", self._features)
        app.router.add_get("/api/client/streaming", self._streaming)
        app.router.add_post("/api/client/metrics", self._post)
        app.router.add_post("/api/client/register", self._post)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
