"""Before a target is loaded: ask it each distinct request of a scenario once, with a plain HTTP client.

That checks the status is the expected one (so a broken route shows up as errors even if wrk never runs),
finds the ETag the get-304 scenario must send, and picks the scenario's typical answer (median body size),
which the baseline then serves with the same status, bytes and headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from benchmarks.load import baseline
from benchmarks.load.processes import Response, fetch
from benchmarks.load.scenarios import Scenario, Workload, workload
from benchmarks.load.targets import Target

# Headers the HTTP server adds to every response itself; the baseline's Sanic adds its own.
_TRANSPORT_HEADERS = {"content-length", "connection", "date", "transfer-encoding", "content-type"}


@dataclass
class Probe:
    workload: Workload
    typical: Response | None = None
    problems: list[str] = field(default_factory=list)


def probe(target: Target, scenario: Scenario, flags: int, given: Workload | None = None) -> Probe:
    """`given` (the baseline's case) skips the ETag lookup: it answers fixed bytes whatever it is sent."""
    path = target.path(scenario)
    if given is not None:
        result = Probe(given)
    elif scenario.name == "get-304":
        plain = workload(scenario, flags)
        first = _ask(target, scenario, plain, plain.requests[0].query, None)
        result = Probe(workload(scenario, flags, etag=first.headers.get("etag")))
        if first.status != 200 or "etag" not in first.headers:
            result.problems.append(_describe(scenario, path, first, "200 with an ETag"))
    else:
        result = Probe(workload(scenario, flags))
    answers = []
    for request in result.workload.samples():
        response = _ask(target, scenario, result.workload, request.query, request.body)
        if response.status != scenario.expected_status:
            result.problems.append(_describe(scenario, path, response, str(scenario.expected_status)))
        elif scenario.name == "client-features" and given is None and _feature_count(response) != flags:
            result.problems.append(f"{path}: {_feature_count(response)} features, expected {flags}")
        else:
            answers.append(response)
    if answers:
        result.typical = sorted(answers, key=lambda r: len(r.body))[len(answers) // 2]
    return result


def baseline_route(scenario: Scenario, typical: Response) -> dict:
    """The baseline's route for `scenario`: the typical answer's status, body and headers."""
    return {
        "path": baseline.route_path(scenario.name),
        "status": typical.status,
        "body_hex": typical.body.hex(),
        "content_type": typical.headers.get("content-type"),
        "headers": {n: v for n, v in typical.header_list if n.lower() not in _TRANSPORT_HEADERS},
    }


def _ask(target: Target, scenario: Scenario, load: Workload, query: str, body: bytes | None) -> Response:
    return fetch(target.service.port, scenario.method, target.path(scenario) + query, load.headers, body)


def _describe(scenario: Scenario, path: str, response: Response, expected: str) -> str:
    return f"{scenario.method} {path}: {response.status} (expected {expected}) {response.body[:120]!r}"


def _feature_count(response: Response) -> int:
    try:
        return len(orjson.loads(response.body)["features"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return -1
