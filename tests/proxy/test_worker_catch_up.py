"""A worker without a snapshot installs a published one when a request asks (flagproxy/proxy/app.py
`_catch_up`), so it never answers 503 after another worker has said ready (the hour-long reliability
campaign once saw that).

A unit test of the worker app's route, not an HTTP test, on purpose: a worker also watches the instance's
publication every 0.1 s, and only with that watch stopped can a test show that the request alone finds the
document. Stopping it needs the app in the test process; over a real process the watch would win the race
as often as not, and the test could not fail. The route handler is called with a Sanic request, no socket:
tests/http/test_workers.py covers the same worker machinery through real `--workers N` processes.
"""

from __future__ import annotations

import asyncio
import json
import os

from sanic import Request
from sanic.compat import Header

from flagproxy.instance.leader import Instance
from flagproxy.proxy.app import create_worker_app
from flagproxy.proxy.settings import ProxySettings
from tests.http.loopback import KEY, SAMPLE


def test_a_worker_without_a_snapshot_installs_a_published_one_when_asked(tmp_path):
    folder = str(tmp_path / "instance")
    Instance.create(folder)  # what the main process of `--workers N` makes before it starts a worker
    options = {"service_url": "http://127.0.0.1:9/api", "service_api_token": "t", "client_keys": [KEY]}
    app = create_worker_app(ProxySettings.load(options, env={}), folder, parent_pid=os.getppid())
    worker = app.ctx.proxy
    toggles, health = worker.routes[("GET", "/proxy")], worker.routes[("GET", "/proxy/health")]

    def request(path: str) -> Request:
        return Request(path.encode(), Header({"authorization": KEY}), "1.1", "GET", None, app)

    async def run() -> None:
        await worker._start(app)  # the worker's start: its follower loads what is published (nothing yet)
        try:
            worker.following.cancel()  # only a request can find the document now
            assert (await toggles(request("/proxy?userId=u1"))).status == 503
            worker.instance.publication.publish(json.dumps(SAMPLE).encode(), "another worker's sync")
            answer = await toggles(request("/proxy?userId=u1"))
            assert answer.status == 200 and json.loads(answer.body)["toggles"], answer.body
            assert (await health(request("/proxy/health"))).status == 200
        finally:
            await worker._stop(app)

    asyncio.run(run())
