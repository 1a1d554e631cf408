"""The loopback upstream: an Unleash client API serving one deterministic snapshot, run as a subprocess.

    python -m benchmarks.load.upstream --flags 200 --port 4242

`GET /api/client/features` answers `benchmarks.datasets.snapshot_payload(flags)` with an ETag, and 304 when
the poller's If-None-Match matches, so the proxies' 5-second refreshes cost next to nothing while wrk runs.
Register and metrics posts are accepted and dropped. `GET /stats` says how many full (200) feature
answers went out: every proxy worker fetches once when it starts, so the harness knows when all of them
have their snapshot. For `flagproxy edge` (benchmarks/load/edge.py) it also answers `POST /edge/validate`:
a token `<project>:<environment>.load-<anything>` is valid (a frontend token when it says `frontend`),
every other is not; `/stats` counts the tokens it was asked about and how many of them were distinct.
`POST /change-every` with a number of seconds (0 stops) makes the document change that often: one flag's
`enabled` flips, so the body and its ETag are new and every proxy fetches and compiles it again
(benchmarks/load/changes.py); `/stats` counts the changes. A separate process, so its work is not counted
against the harness or the proxies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib

import orjson
from aiohttp import web

from benchmarks.datasets import snapshot_payload


def create_app(flags: int) -> web.Application:
    document = snapshot_payload(flags)
    body = orjson.dumps(document)
    etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'

    full_answers = 0
    changes = 0
    changing: asyncio.Task[None] | None = None

    def change() -> None:
        nonlocal body, etag, changes
        feature = document["features"][changes % len(document["features"])]
        feature["enabled"] = not feature["enabled"]
        changes += 1
        body = orjson.dumps(document)
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'

    async def change_every(seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            change()

    async def set_change_every(request: web.Request) -> web.Response:
        nonlocal changing
        seconds = float(await request.text())
        if changing is not None:
            changing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await changing
            changing = None
        if seconds > 0:
            changing = asyncio.get_running_loop().create_task(change_every(seconds))
        return web.Response(status=204)

    async def features(request: web.Request) -> web.Response:
        nonlocal full_answers
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        full_answers += 1
        return web.Response(body=body, content_type="application/json", headers={"ETag": etag})

    async def stats(request: web.Request) -> web.Response:
        distinct = len(set(asked))
        return web.json_response(
            {
                "full_answers": full_answers,
                "tokens_asked": len(asked),
                "distinct_tokens_asked": distinct,
                "changes": changes,
            }
        )

    asked: list[str] = []

    async def validate(request: web.Request) -> web.Response:
        tokens = orjson.loads(await request.read())["tokens"]
        asked.extend(tokens)
        valid = []
        for token in tokens:
            scope, _, secret = token.partition(".")
            project, _, environment = scope.partition(":")
            if secret.startswith("load-") and environment:
                kind = "frontend" if "frontend" in secret else "client"
                scope_json = {"type": kind, "environment": environment, "projects": [project]}
                valid.append({"token": token, **scope_json})
        return web.json_response({"tokens": valid})

    async def accepted(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=202)

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_get("/api/client/features", features)
    app.router.add_post("/api/client/metrics", accepted)
    app.router.add_post("/api/client/register", accepted)
    app.router.add_post("/api/client/metrics/bulk", accepted)
    app.router.add_post("/edge/validate", validate)
    app.router.add_get("/stats", stats)
    app.router.add_post("/change-every", set_change_every)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flags", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(create_app(args.flags), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
