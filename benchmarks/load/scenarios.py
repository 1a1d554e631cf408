"""The seven workloads of a load run, as the requests wrk sends.

A scenario knows its method, path, headers and expected status, and a `Workload` holds the concrete
requests for one snapshot size: one fixed request, a list that wrk rotates through, or a body template
whose userId wrk fills in with a counter (thread id included), so no two requests are alike and no
response cache can help. Contexts come from `benchmarks.datasets` (browser-SDK shaped, deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

import orjson

from benchmarks import datasets

CLIENT_KEY = "load-client-key"  # accepted by the proxies as a client key
SERVER_TOKEN = "load-server-token"  # expServerSideSdkConfig token, for /proxy/client/features
UPSTREAM_TOKEN = "load-upstream-token"
ROTATING = 64  # contexts wrk rotates through
USER_MARK = "@@user@@"  # replaced in the unique scenario's body by wrk with a per-request userId


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    method: str
    path: str  # on the proxies; the baseline serves /baseline/<name>
    expected_status: int = 200
    token: str = CLIENT_KEY


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("post-unique", "POST /proxy, a unique userId per request", "POST", "/proxy"),
    Scenario("post-rotating", f"POST /proxy over {ROTATING} rotating contexts", "POST", "/proxy"),
    Scenario("get-query", f"GET /proxy, {ROTATING} rotating query contexts", "GET", "/proxy"),
    Scenario("get-empty", "GET /proxy with no context (no query)", "GET", "/proxy"),
    Scenario("post-toggles", "POST /proxy with a 5-name toggles list", "POST", "/proxy"),
    Scenario("get-304", "GET /proxy with a matching If-None-Match", "GET", "/proxy", expected_status=304),
    Scenario(
        "client-features", "GET /proxy/client/features", "GET", "/proxy/client/features", token=SERVER_TOKEN
    ),
)
SCENARIOS_BY_NAME = {s.name: s for s in SCENARIOS}


@dataclass(frozen=True)
class Request:
    query: str  # "" or "?..."
    body: bytes | None


@dataclass
class Workload:
    """What one scenario sends: `requests` (rotated through; one entry = the same request every time), or,
    when `unique` is set, bodies built by wrk from `unique` = (prefixes, suffixes) around a fresh userId."""

    scenario: Scenario
    requests: list[Request]
    unique: tuple[list[bytes], list[bytes]] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def nth(self, i: int, user_prefix: str = "u-") -> Request:
        """The i-th request: for a unique workload a new body whose userId is `user_prefix` + i, else the
        rotating requests in turn."""
        if self.unique is not None:
            prefixes, suffixes = self.unique
            k = i % len(prefixes)
            return Request("", prefixes[k] + f"{user_prefix}{i}".encode() + suffixes[k])
        return self.requests[i % len(self.requests)]

    def samples(self) -> list[Request]:
        """Distinct requests to probe before the run (every rotating one; a few made-up unique ones)."""
        if self.unique is None:
            return self.requests
        prefixes, suffixes = self.unique
        pairs = list(zip(prefixes, suffixes, strict=True))[:16]
        return [Request("", head + f"probe-{i}".encode() + tail) for i, (head, tail) in enumerate(pairs)]


def _post_body(context: dict, toggles: list[str] | None = None) -> bytes:
    document: dict = {"context": context}
    if toggles is not None:
        document["toggles"] = toggles
    return orjson.dumps(document)


def _query(context: dict) -> str:
    """The query a browser SDK builds (URLSearchParams): root fields, then properties[name]=value."""
    pairs = [(k, v) for k, v in context.items() if k != "properties"]
    pairs += [(f"properties[{k}]", v) for k, v in context.get("properties", {}).items()]
    return "?" + urlencode(pairs)


def toggle_names(flags: int) -> list[str]:
    """Five flag names spread over the snapshot."""
    features = datasets.snapshot_payload(flags)["features"]
    return [features[i * len(features) // 5]["name"] for i in range(5)]


def workload(scenario: Scenario, flags: int, etag: str | None = None) -> Workload:
    """The requests of `scenario` against a `flags`-flag snapshot; get-304 needs the ETag the target gave."""
    contexts = datasets.contexts(ROTATING)
    headers = {"Authorization": scenario.token}
    if scenario.method == "POST":
        headers["Content-Type"] = "application/json"
    name = scenario.name
    if name == "post-unique":
        prefixes, suffixes = [], []
        for context in contexts:
            prefix, _, suffix = _post_body({**context, "userId": USER_MARK}).partition(USER_MARK.encode())
            prefixes.append(prefix)
            suffixes.append(suffix)
        return Workload(scenario, [], (prefixes, suffixes), headers)
    if name == "post-rotating":
        return Workload(scenario, [Request("", _post_body(c)) for c in contexts], headers=headers)
    if name == "get-query":
        return Workload(scenario, [Request(_query(c), None) for c in contexts], headers=headers)
    if name == "get-empty":
        return Workload(scenario, [Request("", None)], headers=headers)
    if name == "post-toggles":
        names = toggle_names(flags)
        return Workload(scenario, [Request("", _post_body(c, names)) for c in contexts], headers=headers)
    if name == "get-304":
        if etag is not None:
            headers["If-None-Match"] = etag
        return Workload(scenario, [Request(_query(contexts[0]), None)], headers=headers)
    if name == "client-features":
        return Workload(scenario, [Request("", None)], headers=headers)
    raise ValueError(f"unknown scenario {name!r}")
