"""Running `flagproxy edge` processes on loopback, and an upstream that counts what it is asked.

`EdgeProcess` is tests/http/processes.py's Process with the edge's command line; `CountingUpstream` is an
aiohttp server (on tests/http/loopback.py's loop thread) that answers `/edge/validate` from a table of
tokens and `/api/client/features` per token, and records every request, so tests can say how often the
upstream was asked.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tests.http.loopback import LoopThread, StubUpstream, fetch, free_port
from tests.http.processes import Process


class EdgeProcess(Process):
    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        import os

        port = free_port()
        full_env = {**os.environ, "PORT": str(port), "INTERFACE": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
        for name in ("UPSTREAM_URL", "TOKENS", "STRICT", "DYNAMIC", "LOG_LEVEL"):
            full_env.pop(name, None)
        full_env.update(env or {})
        super().__init__(args, full_env, [sys.executable, "-m", "flagproxy", "edge"])

    def wait_ready(self, timeout: float = 20, health: str = "/internal-backstage/ready") -> None:
        super().wait_ready(timeout, health)

    def wait_listening(self, timeout: float = 20) -> None:
        super().wait_ready(timeout, "/internal-backstage/health")

    def request(
        self, method: str, path: str, token: str | None = None, json: Any = None, headers: dict | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = token
        body = None
        if json is not None:
            body = orjson.dumps(json)
            sent["Content-Type"] = "application/json"
        return fetch(self.port, method, path, sent, body, timeout=10)

    def get(self, path: str, token: str | None = None, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("GET", path, token, **kwargs)

    def post(self, path: str, token: str | None = None, json: Any = None, **kwargs: Any) -> Any:
        return self.request("POST", path, token, json, **kwargs)


def edge(upstream_url: str, tokens: list[str], *extra: str, env: dict[str, str] | None = None) -> EdgeProcess:
    args = ["--upstream-url", upstream_url, "--features-refresh-interval-seconds", "1"]
    if tokens:
        args += ["--tokens", ",".join(tokens)]
    return EdgeProcess([*args, *extra], env)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 20) -> None:
    """Until `check()` holds (a wait for something to happen, not a measure of how fast it does)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def flag_names(process: EdgeProcess, token: str) -> set[str]:
    status, _, body = process.get("/api/frontend", token)
    assert status == 200, (status, body)
    return {toggle["name"] for toggle in orjson.loads(body)["toggles"]}


def client_flag_names(process: EdgeProcess, token: str) -> set[str]:
    status, _, body = process.get("/api/client/features", token)
    assert status == 200, (status, body)
    return {feature["name"] for feature in orjson.loads(body)["features"]}


def features_doc(*flags: tuple[str, str, bool]) -> dict[str, Any]:
    """A client features document of (name, project, enabled) flags with the default strategy."""
    return {
        "version": 2,
        "features": [
            {
                "name": name,
                "project": project,
                "enabled": enabled,
                "strategies": [{"name": "default", "parameters": {}, "constraints": []}],
            }
            for name, project, enabled in flags
        ],
    }


EDGE_CLIENT = "[]:development.edge-written-client"
EDGE_FRONTEND = "[]:development.edge-written-frontend"


def edge_written() -> tuple[bytes, bytes]:
    """The features and tokens entries Unleash Edge writes to Redis or S3
    (crates/oss/unleash-edge-persistence): `[environment, document]` pairs, and its validated tokens with
    their secrets."""
    document = {
        **features_doc(("alpha", "default", True), ("beta", "other", True)),
        "query": {"project": ["default", "other"], "environment": "development"},
    }
    entries = [
        {"token": token, "type": kind, "environment": "development", "projects": ["default"],
         "status": "Validated"}
        for token, kind in ((EDGE_CLIENT, "backend"), (EDGE_FRONTEND, "frontend"))
    ]  # fmt: skip
    return orjson.dumps([["development", document]]), orjson.dumps(entries)


def serves_edge_written(*options: str, env: dict[str, str] | None = None) -> None:
    """An edge whose upstream is away, reading `edge_written()` from the store its options name, is ready
    from it; a token of one project sees that project's flags only."""
    process = edge(f"http://127.0.0.1:{free_port()}", [EDGE_CLIENT], *options, env=env)
    try:
        process.wait_ready()
        assert flag_names(process, EDGE_FRONTEND) == {"alpha"}
    finally:
        _, err = process.stop()
    assert process.popen.returncode == 0, err


class CountingUpstream:
    """`tokens`: secret → (type, environment, projects); `documents`: secret → features document."""

    def __init__(self, loop: LoopThread, ssl_context: Any = None) -> None:
        self.loop = loop
        self.ssl_context = (
            ssl_context  # serve HTTPS with it (a server context, maybe asking for client certs)
        )
        self.token_header = "Authorization"  # where edge's token is read from
        self.validate_headers: list[dict[str, str]] = []  # every /edge/validate request's headers
        self.client_names: list[
            str
        ] = []  # each HTTPS request's client certificate's common name ("" if none)
        self.tokens: dict[str, tuple[str, str, list[str]]] = {}
        self.documents: dict[str, dict[str, Any]] = {}
        self.asked: list[str] = []  # every token asked about, in order
        self.validate_calls = 0
        self.validate_delay = 0.0
        self.validate_status = 200
        self.post_status = 202
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        self.runner: web.AppRunner | None = None
        loop.run(self._start())

    def add(self, secret: str, kind: str, environment: str, projects: list[str], doc: Any = None) -> str:
        self.tokens[secret] = (kind, environment, projects)
        if doc is not None:
            self.documents[secret] = doc
        return secret

    @web.middleware
    async def _client_name(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.ssl_context is not None:
            peer = request.transport.get_extra_info("peercert") if request.transport else None
            names = [
                value for rdn in (peer or {}).get("subject", ()) for key, value in rdn if key == "commonName"
            ]
            self.client_names.append(names[0] if names else "")
        return await handler(request)

    async def _validate(self, request: web.Request) -> web.Response:
        import asyncio

        self.validate_calls += 1
        self.validate_headers.append({k.lower(): v for k, v in request.headers.items()})
        body = orjson.loads(await request.read())
        self.asked += body["tokens"]
        if self.validate_delay:
            await asyncio.sleep(self.validate_delay)
        if self.validate_status != 200:
            return web.Response(status=self.validate_status)
        valid = [
            {
                "token": t,
                "type": self.tokens[t][0],
                "environment": self.tokens[t][1],
                "projects": self.tokens[t][2],
            }
            for t in body["tokens"]
            if t in self.tokens
        ]
        return web.json_response({"tokens": valid})

    async def _features(self, request: web.Request) -> web.Response:
        token = request.headers.get(self.token_header, "")
        self.requests.append(
            {
                "path": request.path,
                "token": token,
                "headers": {k.lower(): v for k, v in request.headers.items()},
            }
        )
        if token not in self.tokens or self.tokens[token][0] != "client":
            return web.Response(status=403)
        return web.json_response(self.documents.get(token, {"version": 2, "features": []}))

    async def _post(self, request: web.Request) -> web.Response:
        raw = await request.read()
        entry = {
            "path": request.path,
            "token": request.headers.get(self.token_header, ""),
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": orjson.loads(raw),
            "size": len(raw),
            "status": self.post_status,
        }
        self.requests.append(entry)
        return web.Response(status=self.post_status)

    async def _start(self) -> None:
        app = web.Application(middlewares=[self._client_name])
        app.router.add_post("/edge/validate", self._validate)
        app.router.add_get("/api/client/features", self._features)
        app.router.add_post("/api/client/metrics/bulk", self._post)
        app.router.add_post("/api/client/register", self._post)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=self.ssl_context).start()

    def stop(self) -> None:
        if self.runner is not None:
            self.loop.run(self.runner.cleanup())
            self.runner = None

    # The same record as tests/http/loopback.py's stub keeps: its readers serve here too.
    received = StubUpstream.received
    wait_for = StubUpstream.wait_for
