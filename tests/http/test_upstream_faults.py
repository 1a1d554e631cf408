"""A misbehaving upstream, as a real `flagproxy proxy --workers 2` meets it: every fault keeps the last good
snapshot (same answers, health 200), is logged once, and the proxy recovers and serves the next revision.

The loopback upstream (tests/http/loopback.py) answers with a status, or with one of its FAULTS: malformed
JSON, JSON of the wrong shape, a body cut short, a connection reset mid-body, a body that trickles in
slower than UPSTREAM_TIMEOUT, or no answer at all past it.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import time
from typing import Any

import pytest

from tests.http.loopback import FAULTS, KEY, StubUpstream
from tests.http.processes import Process, wait_until_listening
from tests.http.test_workers import ask

pytestmark = pytest.mark.slow

TIMEOUT_MS = 800
# (what is set on the upstream, the text of the one log line it must cause)
CASES: list[tuple[dict[str, Any], str]] = [
    ({"features_status": 500}, "answered 500"),
    ({"features_status": 503}, "answered 503"),
    ({"features_status": 401}, "answered 401"),
    ({"features_status": 403}, "answered 403"),
    ({"features_status": 404}, "answered 404"),
    ({"fault": "malformed JSON"}, "sent invalid JSON"),
    ({"fault": "valid JSON of the wrong shape"}, "refused whole"),
    ({"fault": "a truncated body"}, "ClientPayloadError"),
    ({"fault": "a connection reset mid-body"}, "Upstream"),
    ({"fault": "a slow trickle"}, "timed out"),
    ({"delay": 2.0}, "timed out"),
]
CLEAR = {"features_status": 200, "fault": None, "delay": 0.0, "features_headers": {}}


def proxy_env(upstream: StubUpstream) -> dict[str, str]:
    return {
        "SERVICE_URL": upstream.url,
        "SERVICE_API_TOKEN": "stub-server-token",
        "SERVICE_PROXY_CLIENT_KEYS": KEY,
        "SERVICE_FETCH_INTERVAL": "100",
        "SERVICE_METRICS_INTERVAL": "0",
        "UPSTREAM_TIMEOUT": str(TIMEOUT_MS),
        "LOG_LEVEL": "info",
    }


def set_upstream(upstream: StubUpstream, changes: dict[str, Any]) -> None:
    for name, value in changes.items():
        setattr(upstream, name, value)


def wait_for_polls(upstream: StubUpstream, count: int, timeout: float) -> None:
    before = len(upstream.received("/api/client/features"))
    upstream.wait_for("/api/client/features", before + count, timeout=timeout)


def answers(process: Process, rounds: int = 6) -> set[tuple[int, str]]:
    """(status, ETag) of the same request over several connections (both workers, most likely)."""
    return {
        (status, headers.get("etag", "")) for status, headers, _, _ in (ask(process) for _ in range(rounds))
    }


def test_every_upstream_fault_keeps_the_last_flags_is_logged_once_and_recovers(launch, upstream):
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.wait_ready()
    wait_until_listening(process, 2)
    for number, (fault, _) in enumerate(CASES):
        good = answers(process)
        assert len(good) == 1 and next(iter(good))[0] == 200, good
        set_upstream(upstream, fault)
        # Several polls meet the fault (the backoff grows, so allow for it).
        wait_for_polls(upstream, 3, timeout=30)
        assert answers(process) == good, fault
        assert ask(process, path="/proxy/health")[0] == 200
        # The fault ends with a new revision: it is served, on every worker that answers.
        revised = copy.deepcopy(upstream.payload)
        revised["features"].append(
            {"name": f"after-fault-{number}", "enabled": True, "strategies": [{"name": "default"}]}
        )
        upstream.payload = revised
        set_upstream(upstream, CLEAR)
        deadline = time.monotonic() + 30
        while not all(f'"after-fault-{number}"'.encode() in ask(process)[2] for _ in range(4)):
            assert time.monotonic() < deadline, f"no recovery after {fault}"
            time.sleep(0.1)
    stdout, stderr = process.stop()
    assert process.popen.returncode == 0, stderr
    lines = [line for line in stdout.splitlines() if "Upstream" in line]
    for fault, said in CASES:
        logged = [line for line in lines if said in line and ("WARN" in line or "ERROR" in line)]
        assert logged, (fault, lines)
    # One line per fault when it starts, one when the upstream answers again: never one per poll.
    failures = [line for line in lines if line.startswith(("WARN", "ERROR"))]
    assert len(failures) == len(CASES), failures
    assert sum("answers again" in line for line in lines) == len(CASES), lines


def test_down_at_start_answers_503_until_the_upstream_answers(launch, upstream):
    set_upstream(upstream, {"features_status": 503})
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.read_until("is listening on")
    wait_for_polls(upstream, 2, timeout=20)
    wait_until_listening(process, 2)
    assert {status for status, _, _, _ in (ask(process) for _ in range(6))} == {503}
    assert ask(process, path="/proxy/health")[0] == 503
    set_upstream(upstream, CLEAR)
    deadline = time.monotonic() + 20
    while ask(process, path="/proxy/health")[0] != 200:  # as a load balancer's readiness probe would
        assert time.monotonic() < deadline, "never ready"
    # Once one worker says ready, every worker answers: a worker that holds no snapshot yet looks for the
    # published one when asked instead of answering 503 until its next watch (up to 0.1 s later; the hour
    # long campaign once caught a 503 here among six answers).
    answers = [ask(process) for _ in range(20)]
    assert [status for status, _, _, _ in answers] == [200] * 20
    assert len({pid for _, _, _, pid in answers}) == 2  # both workers were asked


def test_retry_after_is_honoured(launch, upstream):
    process = launch(proxy_env(upstream), ["--workers", "2"])
    process.wait_ready()
    set_upstream(upstream, {"features_status": 429, "features_headers": {"Retry-After": "2"}})
    wait_for_polls(upstream, 1, timeout=10)
    started = time.monotonic()
    polls_before = len(upstream.received("/api/client/features"))
    time.sleep(1.5)
    # At 100 ms a poll, backing off, it would have asked 5 or more times; Retry-After says wait 2 s.
    assert len(upstream.received("/api/client/features")) - polls_before == 0
    upstream.wait_for("/api/client/features", polls_before + 1, timeout=5)
    assert time.monotonic() - started >= 1.5
    set_upstream(upstream, CLEAR)
    assert json.loads(ask(process)[2])["toggles"]  # still serving


def test_faults_are_known_to_the_upstream():
    assert {case.get("fault") for case, _ in CASES} - {None} == set(FAULTS)


def test_usage_counts_survive_a_failing_metrics_endpoint_and_arrive_exactly_once(launch, upstream):
    env = {**proxy_env(upstream), "SERVICE_METRICS_INTERVAL": "200"}
    process = launch(env, ["--workers", "2"])
    process.wait_ready()
    upstream.post_status = 503
    body = json.dumps({"toggles": ["default-on", "made-up-name"], "context": {"userId": "u1"}})
    sent = 0
    for _ in range(60):
        assert ask(process, "POST", "/proxy", body)[0] == 200
        sent += 1
    # Refused again and again (backing off), the counts are kept, merged into one bucket...
    upstream.wait_for("/api/client/metrics", 3, timeout=20)
    upstream.post_status = 202

    def accepted(name: str, field: str) -> int:
        posts = [p for p in upstream.received("/api/client/metrics") if p["status"] == 202]
        return sum(p["body"]["bucket"]["toggles"].get(name, {}).get(field, 0) for p in posts)

    # ...and arrive exactly once when the upstream takes them again.
    deadline = time.monotonic() + 30
    while accepted("default-on", "yes") < sent:
        assert time.monotonic() < deadline, (accepted("default-on", "yes"), sent)
        time.sleep(0.1)
    time.sleep(1.0)
    assert (accepted("default-on", "yes"), accepted("made-up-name", "no")) == (sent, sent)
    _, stderr = process.stop()
    assert process.popen.returncode == 0, stderr
    assert (accepted("default-on", "yes"), accepted("made-up-name", "no")) == (sent, sent)


def test_killed_outright_and_restarted_it_serves_the_backup_before_the_upstream_answers(launch, upstream):
    env = proxy_env(upstream)
    first = launch(env, ["--workers", "2"])
    first.wait_ready()
    expected = ask(first)
    os.killpg(first.popen.pid, signal.SIGKILL)
    first.popen.wait(10)
    upstream.features_status = 503
    second = launch(env, ["--workers", "2"])
    second.wait_ready()
    wait_until_listening(second, 2)
    for _ in range(6):
        status, headers, body, _ = ask(second)
        assert (status, headers["etag"], body) == (expected[0], expected[1]["etag"], expected[2])
    assert upstream.received("/api/client/features")[-1]["headers"]  # it did ask; the upstream said 503
