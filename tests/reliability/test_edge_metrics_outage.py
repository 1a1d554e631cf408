"""`flagproxy edge`'s metrics under an outage: the upstream's bulk metrics endpoint refuses (503) for
METRICS_OUTAGE_SECONDS (minutes in --long) while SDKs post usage to every route edge counts it on (a backend
SDK's /api/client/metrics, a frontend SDK's /api/frontend/client/metrics, a downstream edge's
/api/client/metrics/bulk), then takes batches again. Every count edge answered 202 for arrives upstream
exactly once, per application and flag, before and after the stop's flush; edge's RSS is measured through
the outage.

And the regression test for what the campaign's fuzz found: usage edge took that the upstream cannot take
(empty names, counts past 2^53, registrations of odd types) no longer blocks every later count.
"""

from __future__ import annotations

import http.client
import json
import random
import signal
import time
from collections.abc import Iterator

import pytest

from tests.edge.conftest import DEV_CLIENT as SERVER_DEV_CLIENT
from tests.edge.harness import edge
from tests.http.loopback import fetch
from tests.reliability.edge_upstream import DEV_CLIENT, DEV_FRONTEND, EdgeUpstream, bucket, bulk_totals
from tests.reliability.figures import FIGURES, rss_kib
from tests.reliability.scale import METRICS_OUTAGE_SECONDS
from tests.reliability.test_edge_fuzz import usage_reaches_the_server

pytestmark = pytest.mark.slow

APPS = [f"campaign-app-{n}" for n in range(5)]
FLAGS = [f"campaign-flag-{n}" for n in range(200)]
# (route, token, how a body is made from {flag: (yes, no)})
ROUTES = [
    ("/api/client/metrics", DEV_CLIENT, "bucket"),
    ("/api/frontend/client/metrics", DEV_FRONTEND, "bucket"),
    ("/api/proxy/client/metrics", DEV_FRONTEND, "bucket"),
    ("/api/client/metrics/bulk", DEV_CLIENT, "bulk"),
]


@pytest.fixture
def edge_upstream(loop_thread) -> Iterator[EdgeUpstream]:
    stub = EdgeUpstream(loop_thread)
    yield stub
    stub.stop()


def body(kind: str, app: str, counts: dict[str, tuple[int, int]]) -> bytes:
    if kind == "bucket":
        return bucket(app, {flag: {"yes": yes, "no": no} for flag, (yes, no) in counts.items()})
    metrics = [
        {"featureName": flag, "appName": app, "timestamp": "2026-01-01T00:00:00Z", "yes": yes, "no": no}
        for flag, (yes, no) in counts.items()
    ]
    return json.dumps({"applications": [], "metrics": metrics}).encode()


def test_usage_counts_through_a_bulk_metrics_outage_arrive_exactly_once(edge_upstream):
    upstream = edge_upstream
    process = edge(upstream.base_url, [DEV_CLIENT], "--metrics-interval-seconds", "1")
    try:
        process.wait_ready()
        upstream.post_status = 503
        rss_before = rss_kib(process.popen.pid)
        pick = random.Random(15)
        sent: dict[tuple[str, str], list[int]] = {}
        posts = 0
        connection = http.client.HTTPConnection("127.0.0.1", process.port, timeout=10)
        started = time.monotonic()
        while time.monotonic() - started < METRICS_OUTAGE_SECONDS:
            path, token, kind = ROUTES[posts % len(ROUTES)]
            app = pick.choice(APPS)
            counts = {flag: (pick.randrange(50), pick.randrange(50)) for flag in pick.sample(FLAGS, 10)}
            headers = {"Authorization": token, "Content-Type": "application/json"}
            connection.request("POST", path, body=body(kind, app, counts), headers=headers)
            response = connection.getresponse()
            response.read()
            assert response.status == 202, (path, response.status)
            posts += 1
            for flag, (yes, no) in counts.items():
                entry = sent.setdefault((app, flag), [0, 0])
                entry[0] += yes
                entry[1] += no
        connection.close()
        refused = len(upstream.received("/api/client/metrics/bulk"))
        assert refused >= 2, "the outage was too short to refuse a send"
        rss_during = rss_kib(process.popen.pid)
        upstream.post_status = 202

        deadline = time.monotonic() + 60
        while bulk_totals(upstream) != sent:
            assert time.monotonic() < deadline, "not every count arrived once"
            time.sleep(0.2)
        process.popen.send_signal(signal.SIGTERM)
        stdout, stderr = process.popen.communicate(timeout=60)
    finally:
        FIGURES.watch(1, 0 if process.popen.poll() in (None, 0) else 1)
        process.stop()
    delivered = bulk_totals(upstream)
    total_sent = sum(yes + no for yes, no in sent.values())
    FIGURES.usage(total_sent, sum(yes + no for yes, no in delivered.values()))
    FIGURES.notes["edge: metrics outage"] = (
        f"{METRICS_OUTAGE_SECONDS:g} s refused ({refused} bulk POSTs), {posts:,} SDK and edge posts on "
        f"{len(ROUTES)} routes, {total_sent:,} counts: every one arrived once"
    )
    FIGURES.rss["edge process, metrics outage (start → end)"] = (rss_before, rss_during)
    assert process.popen.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    assert delivered == sent  # exactly once, after the stop's flush too


# --- regression: what this campaign found -----------------------------------------------------------

UNTAKEABLE = [
    ("/api/client/metrics", bucket("", {"everywhere": {"yes": 1, "no": 0}})),
    ("/api/client/metrics", bucket("odd", {"": {"yes": 1, "no": 0}})),
    ("/api/client/metrics", bucket("odd", {"everywhere": {"yes": 2**64 - 1, "no": 0}})),
    ("/api/client/metrics", bucket("odd", {"everywhere": {"yes": 2**64 - 1, "no": 2**63}})),
    (
        "/api/client/metrics/bulk",
        json.dumps(
            {
                "applications": [
                    {"appName": "odd", "sdkVersion": 5, "started": True, "interval": 2**64 - 1},
                    {"appName": ""},
                ],
                "metrics": [
                    {"featureName": "", "appName": "odd", "timestamp": "x", "yes": 1, "no": 0},
                    {"featureName": "everywhere", "appName": "", "timestamp": "x", "yes": 1, "no": 0},
                ],
            }
        ).encode(),
    ),
]


@pytest.mark.parametrize("path,untakeable", UNTAKEABLE, ids=[f"{n}" for n in range(len(UNTAKEABLE))])
def test_usage_the_upstream_cannot_take_does_not_block_the_counts_after_it(upstream_server, path, untakeable):
    """Found by this campaign: edge took these with 202, and then either every send to the real server was
    refused with 400 and put back for ever (an empty name, a count past 2^53, a registration's odd types),
    or encoding the batch raised (counts summed past 2^64) and every count taken with it was lost; in both
    cases no later count of the environment arrived."""
    process = edge(upstream_server.url, [SERVER_DEV_CLIENT], "--metrics-interval-seconds", "1")
    try:
        process.wait_ready()
        for _ in range(2):
            headers = {"Authorization": SERVER_DEV_CLIENT, "Content-Type": "application/json"}
            assert fetch(process.port, "POST", path, headers, untakeable)[0] == 202
        usage_reaches_the_server(process, upstream_server)
    finally:
        stdout, stderr = process.stop()
    assert "Traceback" not in stdout + stderr and "unexpectedly" not in stdout + stderr, stdout + stderr
