"""Main's generated hostile requests (tests/http/test_fuzz.py's generator: methods, query strings, headers,
content types and bodies) sent to every route of a real `flagproxy edge` syncing with a real `flagproxy
server`, with valid, invalid, uncovered and missing tokens, plus bodies shaped like what edge's POST routes
read (SDK buckets, a downstream edge's bulk batch, registrations, /edge/validate) with hostile values.

The routes are read from the edge app's own route table, so a route added later is fuzzed too. Every answer
is under 500 but for the documented 511 (a frontend token no --tokens client token covers); the process
stays up; a fixed set of requests answers exactly as before; usage counted afterwards still reaches the
server (hostile counts edge took must not block the ones after them); no traceback in its output.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flagproxy.edge.routes import create_app
from flagproxy.edge.settings import EDGE, EdgeSettings
from tests.edge.conftest import DEFAULT_DEV_FRONTEND, DEV_CLIENT, DEV_FRONTEND, PROD_FRONTEND
from tests.edge.harness import EdgeProcess, edge
from tests.http.loopback import fetch
from tests.http.test_fuzz import requests
from tests.reliability.edge_upstream import bucket
from tests.reliability.figures import FIGURES
from tests.reliability.scale import fuzz_settings, pick
from tests.server.harness import ADMIN_TOKEN, ServerProcess

pytestmark = pytest.mark.slow

EXAMPLES = int(pick(300, 3000))
FLAGS = ["everywhere", "prod-only", "other-flag"]
# Valid for their route family, covered by nothing (511), of the other family, unknown, admin, not a token.
TOKENS = [
    DEV_FRONTEND,
    DEFAULT_DEV_FRONTEND,
    DEV_CLIENT,
    PROD_FRONTEND,
    "Bearer " + DEV_FRONTEND,
    "*:development.not-a-known-secret",
    ADMIN_TOKEN,
    "not a token",
    "",
    "x" * 8000,
]


def edge_routes() -> list[tuple[str, frozenset[str]]]:
    """(path template, methods) of every route `flagproxy edge` serves, from the app's route table."""
    settings = EdgeSettings.load({"upstream_url": "http://127.0.0.1:9", "tokens": DEV_CLIENT}, {}, EDGE)
    app = create_app(settings)
    return sorted({("/" + route.raw_path, frozenset(route.methods)) for route in app.router.routes})


ROUTES = edge_routes()

names = st.sampled_from([*FLAGS, "", "nope"]) | st.text(max_size=12)
counts = st.integers(min_value=0, max_value=2**64 - 1) | st.integers(min_value=0, max_value=20)
# Mostly valid, so that bodies get past the checks to what edge keeps and sends upstream.
timestamps = st.sampled_from(["2026-01-01T00:00:00Z"] * 4 + ["", "yesterday"]) | st.text(max_size=8)
toggle_counts = st.fixed_dictionaries(
    {"yes": counts, "no": counts}, optional={"variants": st.dictionaries(names, counts, max_size=3)}
)
sdk_bucket = st.fixed_dictionaries(
    {
        "appName": names,
        "instanceId": names,
        "bucket": st.fixed_dictionaries(
            {
                "start": timestamps,
                "stop": timestamps,
                "toggles": st.dictionaries(names, toggle_counts, max_size=4),
            }
        ),
    },
    optional={"environment": names},
)
registration = st.fixed_dictionaries(
    {
        "appName": names,
        "interval": counts | st.floats(allow_nan=False),
        "started": timestamps | counts,
        "strategies": st.lists(names, max_size=3),
    },
    optional={
        "instanceId": names,
        "sdkVersion": names,
        "connectVia": st.lists(st.dictionaries(names, names)),
    },
)
bulk_metric = st.fixed_dictionaries(
    {"featureName": names, "appName": names, "timestamp": timestamps, "yes": counts, "no": counts},
    optional={"variants": st.dictionaries(names, counts, max_size=3), "environment": names},
)
edge_bodies = st.one_of(
    sdk_bucket,
    registration,
    st.fixed_dictionaries(
        {"applications": st.lists(registration, max_size=2), "metrics": st.lists(bulk_metric, max_size=4)}
    ),
    st.fixed_dictionaries({"tokens": st.lists(st.sampled_from(TOKENS) | st.text(max_size=20), max_size=5)}),
).map(lambda value: json.dumps(value).encode())


@st.composite
def edge_requests(draw: Any) -> tuple[str, str, dict[str, str], bytes | None]:
    """One of main's generated requests, sent to an edge route (often with one of its methods) with one of
    TOKENS or none, and often a body shaped like what that route reads."""
    method, proxy_path, headers, body = draw(requests())
    template, methods = draw(st.sampled_from(ROUTES))
    method = draw(st.sampled_from(sorted(methods)) | st.just(method))
    path = template
    if "<name>" in path:
        path = path.replace("<name>", quote(draw(names), safe="") or "x")
    query = proxy_path.partition("?")[2]
    if query:
        path += "?" + query
    headers = {k: v for k, v in headers.items() if k != "Authorization"}
    token = draw(st.sampled_from([*TOKENS, None]))
    if token is not None:
        headers["Authorization"] = token
    if method == "POST" and draw(st.booleans()):
        body = draw(edge_bodies)
        headers["Content-Type"] = "application/json"
    elif method in ("GET", "HEAD"):
        body = None
    return method, path, headers, body


CHECKS = [
    ("GET", "/api/frontend?userId=u1", DEV_FRONTEND),
    ("GET", "/api/proxy/all?userId=u2", DEFAULT_DEV_FRONTEND),
    ("POST", "/api/frontend/features/everywhere", DEV_FRONTEND),
    ("GET", "/api/client/features", DEV_CLIENT),
    ("GET", "/api/client/features/other-flag", DEV_CLIENT),
    ("GET", "/internal-backstage/ready", None),
    ("GET", "/api/frontend", PROD_FRONTEND),  # the documented 511
]


def answers(port: int) -> list[tuple[int, bytes]]:
    found = []
    for method, path, token in CHECKS:
        headers = {"Authorization": token} if token else {}
        body = b"{}" if method == "POST" else None
        if body:
            headers["Content-Type"] = "application/json"
        status, _, answer = fetch(port, method, path, headers, body)
        found.append((status, answer))
    return found


def sentinel_usage(server: ServerProcess, app: str) -> tuple[int, int]:
    """(yes, no) the server recorded for `everywhere` from application `app`."""
    answer = server.api().get("/api/admin/client-metrics/features/everywhere")
    assert answer.status == 200, answer.body
    rows = [row for row in answer.json()["lastHourUsage"] if row["appName"] == app]
    return sum(row["yes"] for row in rows), sum(row["no"] for row in rows)


def usage_reaches_the_server(process: EdgeProcess, server: ServerProcess) -> None:
    """A bucket counted now arrives upstream: nothing edge took before blocks it."""
    app = f"campaign-sentinel-{uuid.uuid4().hex[:8]}"
    status, _, body = fetch(
        process.port,
        "POST",
        "/api/client/metrics",
        {"Authorization": DEV_CLIENT, "Content-Type": "application/json"},
        bucket(app, {"everywhere": {"yes": 7, "no": 2}}),
    )
    assert status == 202, body
    deadline = time.monotonic() + 30
    while sentinel_usage(server, app) != (7, 2):
        assert time.monotonic() < deadline, sentinel_usage(server, app)
        time.sleep(0.5)


def test_generated_requests_on_every_edge_route_leave_it_up_with_the_same_answers(upstream_server):
    process = edge(upstream_server.url, [DEV_CLIENT], "--metrics-interval-seconds", "1")
    try:
        process.wait_ready()
        before = answers(process.port)
        assert [status for status, _ in before] == [200] * (len(CHECKS) - 1) + [511], before

        @fuzz_settings(EXAMPLES)
        @given(request=edge_requests())
        def fuzz(request: tuple[str, str, dict[str, str], bytes | None]) -> None:
            method, path, headers, body = request
            status, _, answer = fetch(process.port, method, path, headers, body, timeout=15)
            FIGURES.hostile_input("edge: generated requests on every route (hypothesis)")
            documented = status == 511 and path.startswith(("/api/frontend", "/api/proxy"))
            assert status < 500 or documented, (method, path, headers, body, status, answer[:200])

        fuzz()
        assert answers(process.port) == before
        assert process.popen.poll() is None
        usage_reaches_the_server(process, upstream_server)
    finally:
        FIGURES.watch(1, 0 if process.popen.poll() is None else 1)
        stdout, stderr = process.stop()
    assert process.popen.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
