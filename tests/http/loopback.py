"""Real sockets on loopback: a stub upstream (aiohttp.web), an HTTPS tunnelling proxy, and the request
helpers for a proxy under test, on one background loop. The proxies under test are real processes
(processes.py); the fixtures that start them live in conftest.py.

Tests talk to both with plain blocking `http.client` from the test thread, so what is checked is exactly
what goes over the wire. Everything started here is stopped at the end of the test that started it.

    def test_x(proxy_factory):
        proxy = proxy_factory(enable_all_endpoint=True)     # ready: the upstream served the sample file
        status, headers, body = proxy.get("/proxy?userId=1", key="proxy-secret")
        proxy.upstream.requests                              # what the upstream received
"""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from flagproxy.proxy.settings import ProxySettings

DATA = Path(__file__).parent / "data"
SAMPLE = json.loads((DATA / "sample-features.json").read_text())
KEY = "proxy-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LoopThread:
    """An asyncio loop in a daemon thread; `run(coro)` runs a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 10) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def fetch(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
    timeout: float = 5,
    source: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection; headers come back with lower-case names. `source` picks the
    caller's loopback address (any of 127.0.0.0/8 reaches a server on 127.0.0.1)."""
    source_address = (source, 0) if source else None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=source_address)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        conn.close()


class StubUpstream:
    """The parts of the Unleash client API a proxy uses, recording every request it receives."""

    def __init__(self, loop: LoopThread, payload: dict[str, Any], ssl_context: Any = None) -> None:
        self.loop = loop
        self.ssl_context = ssl_context
        self.payload = payload
        self.features_status = 200
        self.features_headers: dict[str, str] = {}  # sent with a non-200 features answer (Retry-After)
        self.fault: str | None = None  # a broken features answer instead of the payload: see FAULTS
        self.post_status = 202
        self.delay = 0.0
        self.bootstrap_payload: dict[str, Any] | None = None
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}/api"
        self.runner: web.AppRunner | None = None
        loop.run(self._start())

    def etag(self) -> str:
        return '"' + hashlib.sha1(json.dumps(self.payload, sort_keys=True).encode()).hexdigest()[:16] + '"'

    async def _record(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        entry = {
            "method": request.method,
            "path": request.path,
            "query": request.raw_path.partition("?")[2],
            "headers": dict(request.headers),
            "body": json.loads(raw) if raw else None,
            "time": time.monotonic(),
        }
        self.requests.append(entry)
        return entry

    async def _features(self, request: web.Request) -> web.Response:
        await self._record(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.features_status != 200:
            return web.Response(
                status=self.features_status, text="upstream says no", headers=self.features_headers
            )
        if self.fault is not None:
            return await FAULTS[self.fault](request)
        etag = self.etag()
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.json_response(self.payload, headers={"ETag": etag})

    async def _post(self, request: web.Request) -> web.Response:
        entry = await self._record(request)
        entry["status"] = status = self.post_status  # what it was answered
        return web.Response(status=status)

    async def _bootstrap(self, request: web.Request) -> web.Response:
        await self._record(request)
        if self.bootstrap_payload is None:
            return web.Response(status=404)
        return web.json_response(self.bootstrap_payload)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/api/client/features", self._features)
        app.router.add_post("/api/client/metrics", self._post)
        app.router.add_post("/api/client/register", self._post)
        app.router.add_get("/bootstrap/features.json", self._bootstrap)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=self.ssl_context).start()

    def stop(self) -> None:
        if self.runner is not None:
            self.loop.run(self.runner.cleanup())
            self.runner = None

    def received(self, path: str) -> list[dict[str, Any]]:
        return [r for r in list(self.requests) if r["path"] == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 5) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.received(path)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"upstream got {len(self.received(path))} requests to {path}, wanted {count}")


async def _malformed(request: web.Request) -> web.StreamResponse:
    return web.Response(body=b'{"version": 2, "features": [{"name": ', content_type="application/json")


async def _wrong_shape(request: web.Request) -> web.StreamResponse:
    return web.json_response({"version": 2, "flags": [{"name": "not-a-feature-list"}]})


async def _cut_short(request: web.Request, reset: bool) -> web.StreamResponse:
    """Promise a whole document, send its first bytes, then close the connection (or reset it)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.content_length = 10_000
    await response.prepare(request)
    await response.write(b'{"version": 2, "features": [{"name": "half')
    transport = request.transport
    if transport is not None:
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.close()
    return response


async def _truncated(request: web.Request) -> web.StreamResponse:
    return await _cut_short(request, reset=False)


async def _reset(request: web.Request) -> web.StreamResponse:
    return await _cut_short(request, reset=True)


async def _trickle(request: web.Request) -> web.StreamResponse:
    """A valid document, one byte every 100 ms (3 s in all): slower than the tests' UPSTREAM_TIMEOUT."""
    body = json.dumps({"version": 2, "features": []}).encode()
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.content_length = len(body)
    await response.prepare(request)
    for byte in body:
        await response.write(bytes([byte]))
        await asyncio.sleep(0.1)
    return response


# What StubUpstream.fault can name: each answers GET /api/client/features in a broken way.
FAULTS = {
    "malformed JSON": _malformed,
    "valid JSON of the wrong shape": _wrong_shape,
    "a truncated body": _truncated,
    "a connection reset mid-body": _reset,
    "a slow trickle": _trickle,
}


class ConnectProxy:
    """An HTTPS proxy on loopback: it only tunnels (`CONNECT host:port`) and records every target.

    `hosts` maps names to addresses, so a test can use a name that only the proxy can resolve: a request
    that reaches the target at all went through here.
    """

    def __init__(self, loop: LoopThread, hosts: dict[str, str] | None = None) -> None:
        self.loop = loop
        self.hosts = hosts or {}
        self.targets: list[str] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: asyncio.Server | None = None
        loop.run(self._start())

    async def _start(self) -> None:
        self.server = await asyncio.start_server(self._tunnel, "127.0.0.1", self.port)

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            self.targets.append(target)
            host, _, port = target.rpartition(":")
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.hosts.get(host, host), int(port)
            )
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()

            async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
                try:
                    while data := await source.read(65536):
                        sink.write(data)
                        await sink.drain()
                finally:
                    sink.close()

            await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def _stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def stop(self) -> None:
        if self.server is not None:
            self.loop.run(self._stop())
            self.server = None


class ProxyCalls:
    """Requests to a proxy on `self.port`, the client key sent in the header its settings name."""

    port: int
    settings: ProxySettings

    def request(
        self,
        method: str,
        path: str,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        body: Any = None,
        json_body: Any = None,
        source: str | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        all_headers = dict(headers or {})
        if key is not None:
            all_headers[self.settings.client_keys_header_name] = key
        if json_body is not None:
            body = json.dumps(json_body)
            all_headers.setdefault("Content-Type", "application/json")
        return fetch(self.port, method, path, all_headers, body, source=source)

    def get(self, path: str, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, json_body: Any = None, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("POST", path, json_body=json_body, **kwargs)

    def toggles(self, path: str = "/proxy", **kwargs: Any) -> list[dict[str, Any]]:
        status, _, body = self.get(path, key=KEY, **kwargs)
        assert status == 200, body
        return json.loads(body)["toggles"]
