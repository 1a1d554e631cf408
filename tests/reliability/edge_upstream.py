"""A loopback upstream for `flagproxy edge` that the campaign can make fail: main's StubUpstream (its features
faults, its metrics status, its record of every request) plus what an edge also asks, `POST /edge/validate`
and `POST /api/client/metrics/bulk`, and a way to go down and come back on the same port.

The campaign's plugin counts its fault answers as it counts the proxy's upstream's, under the label "edge
upstream" (plugin.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from aiohttp import web

from tests.http.loopback import SAMPLE, LoopThread, StubUpstream

# The tokens it knows: secret → (type, environment, projects), as /edge/validate answers them.
DEV_CLIENT = "*:development.campaign-client-secret"
DEV_FRONTEND = "*:development.campaign-frontend-secret"
PROD_FRONTEND = "*:production.campaign-frontend-prod-secret"  # no client token covers it: 511
TOKENS = {
    DEV_CLIENT: ("client", "development", ["*"]),
    DEV_FRONTEND: ("frontend", "development", ["*"]),
    PROD_FRONTEND: ("frontend", "production", ["*"]),
}


class EdgeUpstream(StubUpstream):
    label = "edge upstream"

    def __init__(self, loop: LoopThread, payload: dict[str, Any] | None = None) -> None:
        self.tokens = dict(TOKENS)
        self.validate_status = 200
        self.validate_fault: str | None = None  # "malformed JSON": a 200 whose body does not parse
        self.validate_calls = 0
        super().__init__(loop, copy.deepcopy(payload or SAMPLE))
        self.base_url = self.url.removesuffix("/api")  # what --upstream-url takes

    async def _validate(self, request: web.Request) -> web.Response:
        entry = await self._record(request)
        self.validate_calls += 1
        if self.validate_status != 200:
            return web.Response(status=self.validate_status, text="upstream says no")
        if self.validate_fault == "malformed JSON":
            return web.Response(body=b'{"tokens": [{"token": ', content_type="application/json")
        valid = [
            {"token": t, "type": kind, "environment": environment, "projects": projects}
            for t in entry["body"]["tokens"]
            if t in self.tokens
            for kind, environment, projects in [self.tokens[t]]
        ]
        return web.json_response({"tokens": valid})

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/api/client/features", self._features)
        app.router.add_post("/api/client/metrics/bulk", self._post)
        app.router.add_post("/edge/validate", self._validate)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    def down(self) -> None:
        """Stop listening: every request the edge makes is refused, until `up()`."""
        self.stop()

    def up(self) -> None:
        self.loop.run(self._start())

    def revise(self, name: str) -> None:
        """A new revision of the flags: `name` on for everyone."""
        revised = copy.deepcopy(self.payload)
        revised["features"].append({"name": name, "enabled": True, "strategies": [{"name": "default"}]})
        self.payload = revised


def bulk_totals(upstream: StubUpstream) -> dict[tuple[str, str], list[int]]:
    """(appName, featureName) → [yes, no] over the bulk batches the upstream took (answered 2xx)."""
    found: dict[tuple[str, str], list[int]] = {}
    for post in upstream.received("/api/client/metrics/bulk"):
        if post.get("status", 0) >= 300:
            continue
        for metric in post["body"]["metrics"]:
            entry = found.setdefault((metric["appName"], metric["featureName"]), [0, 0])
            entry[0] += metric["yes"]
            entry[1] += metric["no"]
    return found


def bucket(app: str, toggles: dict[str, dict[str, int]]) -> bytes:
    """An SDK's metrics body."""
    return json.dumps(
        {
            "appName": app,
            "instanceId": "campaign",
            "bucket": {"start": "2026-01-01T00:00:00Z", "stop": "2026-01-01T00:01:00Z", "toggles": toggles},
        }
    ).encode()
