"""Features documents of the wrong type are refused whole (flagproxy/sync/documents.py), as a real
`flagproxy proxy` meets them from its upstream, its backup and its bootstrap: the last good snapshot keeps
serving with the same answers and ETags, health stays 200, one log line names the first offending JSON
path, `flagproxy_refused_documents_total` counts them by reason and status.json shows the last refusal.

The loopback upstream serves each bad document as an ordinary 200 with its own ETag: a fault only a
stand-in can inject. Before the check, a flag whose `strategies` was a string dropped out of every answer,
and `{"features": [1, "x", null]}` emptied every answer.
"""

from __future__ import annotations

import copy
import json
import signal
import time
from typing import Any

import pytest

from tests.http.loopback import KEY, SAMPLE, StubUpstream, fetch
from tests.http.processes import Process
from tests.http.test_prometheus import scrape, value
from tests.http.test_workers import proxy_env

pytestmark = pytest.mark.slow


def _with_flag(field: str, wrong: Any) -> dict[str, Any]:
    document = copy.deepcopy(SAMPLE)
    document["features"][1][field] = wrong
    return document


def _with_strategy(field: str, wrong: Any) -> dict[str, Any]:
    document = copy.deepcopy(SAMPLE)
    document["features"][0]["strategies"] = [{"name": "default", field: wrong}]
    return document


# (the document, the JSON path the log line must name, the reason label)
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"version": 2, "features": [1, "x", None]}, "$.features[0] must be an object, not a", "wrong_type"),
    ({"events": [1, "x", None]}, "$.events[0] must be an object", "wrong_type"),
    ({"events": [{"type": "feature-updated", "feature": {"name": 3}}]}, "$.events[0].feature.name",
     "wrong_type"),
    (_with_flag("strategies", "default"), "$.features[1].strategies must be a list", "wrong_type"),
    (_with_flag("variants", {"name": "a"}), "$.features[1].variants must be a list", "wrong_type"),
    (_with_flag("name", 7), "$.features[1].name must be a string", "wrong_type"),
    (_with_flag("dependencies", [{"enabled": True}]), "$.features[1].dependencies[0].feature is missing",
     "missing_field"),
    (_with_strategy("constraints", {"contextName": "userId"}), "$.features[0].strategies[0].constraints",
     "wrong_type"),
    (_with_strategy("segments", ["1"]), "$.features[0].strategies[0].segments[0] must be an integer",
     "wrong_type"),
    ({"version": 2, "features": [], "segments": [{"id": 1, "constraints": "x"}]}, "$.segments[0].constraints",
     "wrong_type"),
    ({"version": 2, "flags": []}, "is not a client features document", "not_a_document"),
]  # fmt: skip


def served(process: Process) -> tuple[Any, ...]:
    """What a client sees: (status, ETag, body) of the evaluated list, the features document, health."""
    answers = []
    for path in ("/proxy?userId=u1", "/proxy/client/features"):
        status, headers, body = fetch(process.port, "GET", path, headers={"Authorization": KEY})
        answers.append((status, headers.get("etag"), body))
    answers.append(fetch(process.port, "GET", "/proxy/health")[0])
    return tuple(answers)


def status_json(process: Process) -> dict[str, Any]:
    status, _, body = fetch(process.port, "GET", "/proxy/status.json", headers={"Authorization": KEY})
    assert status == 200, body
    return json.loads(body)


def polls(upstream: StubUpstream) -> int:
    return len(upstream.received("/api/client/features"))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_document_of_the_wrong_type_is_refused_whole(launch, upstream: StubUpstream, workers):
    process = launch(
        proxy_env(upstream, SERVICE_FETCH_INTERVAL="100", LOG_LEVEL="info"), ["--workers", workers]
    )
    process.wait_ready()
    good = served(process)
    assert good[0][0] == 200 and b"default-on" in good[0][2]
    seen = ""
    for document, path, _ in BAD:
        upstream.payload = document
        before = polls(upstream)
        seen += process.read_until(path)  # said once it is met
        upstream.wait_for("/api/client/features", before + 3, timeout=30)  # and met again, silently
        assert served(process) == good, path
    _, samples = scrape(process.port)
    for reason in ("wrong_type", "missing_field", "not_a_document"):
        want = sum(1 for _, _, r in BAD if r == reason)
        assert value(samples, "flagproxy_refused_documents_total", reason=reason) >= want, reason
    refusal = status_json(process)["last_refusal"]
    assert refusal["source"] == "upstream" and refusal["reason"] == "not_a_document"
    assert "is not a client features document" in refusal["error"] and refusal["at"] > time.time() - 60

    # A good document again: served at once.
    revised = copy.deepcopy(SAMPLE)
    revised["features"].append(
        {"name": "after-refusals", "enabled": True, "strategies": [{"name": "default"}]}
    )
    upstream.payload = revised
    deadline = time.monotonic() + 30
    while b"after-refusals" not in served(process)[0][2]:
        assert time.monotonic() < deadline, "the good document was never served"
        time.sleep(0.1)
    stdout, stderr = process.stop(signal.SIGTERM)
    assert process.popen.returncode == 0, stderr
    lines = (seen + stdout + stderr).splitlines()
    said = [line for line in lines if "refused whole" in line and line.startswith(("ERROR", "WARN"))]
    # One line per bad document (a change of state), not one per poll.
    assert len(said) == len(BAD), said


def test_a_backup_of_the_wrong_type_is_refused_and_counted(
    launch, upstream: StubUpstream, base_env, tmp_path
):
    """The backup (read before the upstream answers) goes through the same check: a bad one is not served,
    the proxy waits for the upstream, and the refusal is counted with its source."""
    from flagproxy.sync.backup import UpstreamBackup

    env = proxy_env(upstream, UNLEASH_APP_NAME="flagproxy-refused", LOG_LEVEL="info")
    backup = UpstreamBackup(env["SERVICE_URL"], env["SERVICE_API_TOKEN"], base_env["TMPDIR"])
    backup.set("flagproxy-refused", {"version": 2, "features": [{"name": 1}]})
    upstream.features_status = 503
    process = launch(env)
    process.read_until("$.features[0].name must be a string")
    assert fetch(process.port, "GET", "/proxy/health")[0] == 503
    upstream.features_status = 200
    process.wait_ready()
    _, samples = scrape(process.port)
    assert value(samples, "flagproxy_refused_documents_total", reason="wrong_type") == 1
    refusal = status_json(process)["last_refusal"]
    assert refusal["source"] == "backup" and "$.features[0].name" in refusal["error"]
