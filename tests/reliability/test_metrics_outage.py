"""The metrics endpoint refuses (503) for a while under load - METRICS_OUTAGE_SECONDS, minutes in --long -
then takes them again. Callers name more distinct toggles than a bucket holds (MAX_TOGGLES), so the bound on
what waits is reached: every count either arrives exactly once or is in the one warning that says how many
did not fit, and the constant toggle every request names (always in the bucket) arrives exactly once per
answered request. The main process's RSS (where the waiting bucket lives) is measured through the outage.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import time

import pytest

from tests.http.loopback import KEY, StubUpstream
from tests.http.test_workers import proxy_env
from tests.reliability.figures import FIGURES, rss_kib
from tests.reliability.scale import METRICS_OUTAGE_SECONDS

pytestmark = pytest.mark.slow

CONSTANT = "default-on"
MAX_TOGGLES = 10_000  # docs/proxy.md: a bucket holds at most 10,000 toggle names (not read from flagproxy)
NAMES = MAX_TOGGLES + 2_000  # distinct made-up names sent during the outage: more than a bucket holds
PER_REQUEST = 20


def accepted(upstream: StubUpstream) -> list[dict]:
    return [
        post["body"]["bucket"]["toggles"]
        for post in upstream.received("/api/client/metrics")
        if post["status"] == 202
    ]


def totals(upstream: StubUpstream) -> tuple[int, int, int]:
    """(yes of CONSTANT, every count of every made-up name, the most names one POST carried)."""
    buckets = accepted(upstream)
    constant = sum(bucket.get(CONSTANT, {}).get("yes", 0) for bucket in buckets)
    made_up = sum(
        c["yes"] + c["no"] for bucket in buckets for name, c in bucket.items() if name.startswith("n-")
    )
    return constant, made_up, max((len(bucket) for bucket in buckets), default=0)


def test_counts_through_a_long_metrics_outage_arrive_once_or_are_said_dropped(launch, upstream):
    process = launch(
        proxy_env(upstream, SERVICE_METRICS_INTERVAL="500", LOG_LEVEL="warn"), ["--workers", "2"]
    )
    process.wait_ready()
    upstream.post_status = 503
    rss_before = rss_kib(process.popen.pid)
    requests = made_up_sent = 0
    next_name = 0
    connection = http.client.HTTPConnection("127.0.0.1", process.port, timeout=10)
    started = time.monotonic()
    while time.monotonic() - started < METRICS_OUTAGE_SECONDS:
        names = [f"n-{(next_name + i) % NAMES}" for i in range(PER_REQUEST)]
        next_name += PER_REQUEST
        body = json.dumps({"toggles": [CONSTANT, *names], "context": {"userId": "u1"}})
        connection.request(
            "POST", "/proxy", body=body, headers={"Authorization": KEY, "Content-Type": "application/json"}
        )
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        requests += 1
        made_up_sent += PER_REQUEST
    connection.close()
    assert next_name >= NAMES, "too few requests to pass the bound; lengthen METRICS_OUTAGE_SECONDS"
    refused = len(upstream.received("/api/client/metrics"))
    rss_during = rss_kib(process.popen.pid)
    upstream.post_status = 202

    deadline = time.monotonic() + 60
    while totals(upstream)[0] < requests:
        assert time.monotonic() < deadline, (totals(upstream), requests)
        time.sleep(0.2)
    process.popen.send_signal(signal.SIGTERM)
    stdout, stderr = process.popen.communicate(timeout=30)
    assert process.popen.returncode == 0, stderr[-2000:]

    constant, made_up, widest = totals(upstream)
    dropped = sum(int(n) for n in re.findall(r"(\d+) usage counts did not fit", stdout + stderr))
    FIGURES.usage(requests + made_up_sent, constant + made_up, dropped)
    FIGURES.notes["metrics outage"] = (
        f"{METRICS_OUTAGE_SECONDS:g} s refused ({refused} POSTs), {requests:,} requests naming {NAMES:,} "
        f"toggles: {dropped:,} counts past the {MAX_TOGGLES:,}-name bound said dropped, the rest arrived once"
    )
    FIGURES.rss["proxy main process, metrics outage (start → end)"] = (rss_before, rss_during)
    assert constant == requests  # exactly once
    assert made_up + dropped == made_up_sent  # every count arrived once, or was said not to fit
    assert dropped > 0  # the bound was reached, and said
    assert widest <= MAX_TOGGLES
