"""The same request to the three services gets the same answer: a differential test over real processes.

One `flagproxy server` (SQLite and PostgreSQL) is seeded through its admin API with every built-in strategy,
every constraint operator, a segment, variants (feature and strategy, with overrides and payloads) and
dependencies. A `flagproxy proxy` and a `flagproxy edge` read it. Hypothesis makes contexts with the hard
cases (numbers such as 1, 1.0, -0 and 1e3, also sent as those very JSON texts, booleans, null, empty and very
long strings, unicode, currentTime in several RFC 3339 forms or absent, userId as a number, properties named
like standard fields, remoteAddress in the body or only from the connection, which comes from one of two
loopback addresses), and each goes to the server's POST and GET `/api/frontend/all` (a POST's also to its
playground), the proxy's POST and GET `/proxy/all` and edge's POST and GET `/api/frontend/all` (or each one's
route of enabled flags only): every flag's enabled state and variant must agree.

Left out by rule, never by name: flags whose answer can be drawn at random (`answer_can_be_random`), and
no constraint reads `appName` or `environment`, whose defaults are each product's own setting (the
proxy's `--service-app-name` and `--environment`, edge's token environment), not the request's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.demo.processes import PROXY_KEY, ProxyProcess
from tests.edge.harness import EdgeProcess, edge
from tests.http.loopback import fetch
from tests.server.harness import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    FRONTEND_TOKEN,
    Api,
    PostgresDatabases,
    ServerProcess,
    base_env,
)

EXAMPLES = 150
SOURCES = ("127.0.0.1", "127.0.0.7")  # the connection's address: the caller's loopback source
DATE = "2024-06-01T12:00:00.000Z"


# ---- the flags -----------------------------------------------------------------------------------------


def _constraint(field: str, operator: str, values: list[str] | None = None, **more: Any) -> dict[str, Any]:
    shaped: dict[str, Any] = {"contextName": field, "operator": operator, **more}
    if values is not None:
        shaped["values"] = values
    return shaped


CONSTRAINTS: dict[str, list[dict[str, Any]]] = {
    "c-in": [_constraint("n", "IN", ["1", "1000", "0", "true", ""])],
    "c-not-in": [_constraint("region", "NOT_IN", ["us", ""])],
    "c-starts": [_constraint("email", "STR_STARTS_WITH", ["admin", "ü"])],
    "c-ends": [_constraint("email", "STR_ENDS_WITH", ["@example.com"], caseInsensitive=True)],
    "c-contains": [_constraint("email", "STR_CONTAINS", ["x"], inverted=True)],
    "c-num-eq": [_constraint("n", "NUM_EQ", value="1")],
    "c-num-gt": [_constraint("n", "NUM_GT", value="0")],
    "c-num-gte": [_constraint("n", "NUM_GTE", value="1000")],
    "c-num-lt": [_constraint("n", "NUM_LT", value="-0.5")],
    "c-num-lte": [_constraint("n", "NUM_LTE", value="2.5")],
    "c-date-after": [_constraint("currentTime", "DATE_AFTER", value=DATE)],
    "c-date-before": [_constraint("currentTime", "DATE_BEFORE", value=DATE)],
    "c-semver-eq": [_constraint("version", "SEMVER_EQ", value="1.2.3")],
    "c-semver-gt": [_constraint("version", "SEMVER_GT", value="1.2.3")],
    "c-semver-lt": [_constraint("version", "SEMVER_LT", value="2.0.0-beta.1")],
    "c-semver-gte": [_constraint("version", "SEMVER_GTE", value="1.0.0")],
    "c-semver-lte": [_constraint("version", "SEMVER_LTE", value="1.2.3")],
    "c-regex": [_constraint("email", "REGEX", value="^[a-z]+@example\\.(com|org)$")],
    "c-cidr": [_constraint("remoteAddress", "IN_CIDR", ["127.0.0.7/32", "10.0.0.0/8", "::1"])],
    "c-user-id": [_constraint("userId", "IN", ["1", "42", "u1"])],
    "c-session-id": [_constraint("sessionId", "STR_STARTS_WITH", ["s"])],
    "c-two": [_constraint("region", "IN", ["eu"]), _constraint("n", "NUM_GT", value="0", inverted=True)],
}

STRATEGIES: dict[str, dict[str, Any]] = {
    "s-default": {"name": "default"},
    "s-user-with-id": {"name": "userWithId", "parameters": {"userIds": "u1, 42,1"}},
    "s-rollout-user": {"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "userId"}},
    "s-rollout-session": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "30", "stickiness": "sessionId", "groupId": "g1"},
    },
    "s-rollout-custom": {"name": "flexibleRollout", "parameters": {"rollout": "60", "stickiness": "tenant"}},
    "s-rollout-all": {"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "default"}},
    "s-gradual-user": {"name": "gradualRolloutUserId", "parameters": {"percentage": "40", "groupId": "g2"}},
    "s-gradual-session": {"name": "gradualRolloutSessionId", "parameters": {"percentage": "60"}},
    "s-remote-address": {"name": "remoteAddress", "parameters": {"IPs": "127.0.0.7,10.0.0.0/8,::1"}},
    "s-hostname": {"name": "applicationHostname", "parameters": {"hostNames": socket.gethostname()}},
    # Drawn at random for some contexts: the rule below leaves them out.
    "r-default-stickiness": {"name": "flexibleRollout", "parameters": {"rollout": "50"}},
    "r-random-stickiness": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "50", "stickiness": "random"},
    },
    "r-gradual-random": {"name": "gradualRolloutRandom", "parameters": {"percentage": "50"}},
}

PAYLOAD = {"type": "json", "value": '{"a": 1}'}


def seed(api: Api) -> None:
    """Every flag through the admin API, on in development unless said otherwise."""

    def flag(name: str, *strategies: dict[str, Any], on: bool = True) -> None:
        api.create_feature(name)
        for strategy in strategies:
            api.add_strategy(name, {"constraints": [], "parameters": {}, **strategy})
        if on:
            api.switch(name, True)

    for name, constraints in CONSTRAINTS.items():
        flag(name, {"name": "default", "constraints": constraints})
    for name, strategy in STRATEGIES.items():
        flag(name, strategy)
    flag("off-in-development", {"name": "default"}, on=False)
    segment = api.create_segment("eu-tenants", [_constraint("region", "IN", ["eu", "EU"])])
    flag(
        "segmented",
        {"name": "flexibleRollout", "parameters": {"rollout": "100"}, "segments": [segment["id"]]},
    )
    strategy_variants = [
        {
            "name": "blue",
            "weight": 500,
            "weightType": "variable",
            "stickiness": "remoteAddress",
            "payload": PAYLOAD,
        },
        {"name": "green", "weight": 500, "weightType": "variable", "stickiness": "remoteAddress"},
    ]
    flag(
        "strategy-variants",
        {"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "userId"},
         "variants": strategy_variants},
    )  # fmt: skip
    flag("feature-variants", {"name": "default"})
    variants = [
        {"name": "a", "weight": 300, "weightType": "fix", "stickiness": "remoteAddress",
         "overrides": [{"contextName": "userId", "values": ["u1"]}]},
        {"name": "b", "weight": 0, "weightType": "variable", "stickiness": "remoteAddress",
         "payload": {"type": "string", "value": "bee"}},
        {"name": "c", "weight": 0, "weightType": "variable", "stickiness": "remoteAddress",
         "overrides": [{"contextName": "tenant", "values": ["acme"]}]},
    ]  # fmt: skip
    path = "/api/admin/projects/default/features/{}/environments/development/variants"
    answer = api.put(path.format("feature-variants"), variants)
    assert answer.status == 200, answer.body
    for stickiness in ("sessionId", "default"):  # random for a context without a sessionId (and userId)
        flag(f"r-variants-by-{stickiness}", {"name": "default"})
        restuck = [{**v, "stickiness": stickiness} for v in variants]
        assert api.put(path.format(f"r-variants-by-{stickiness}"), restuck).status == 200
    for child, parent, needs in (
        ("child-of-on", "s-default", {"enabled": True}),
        ("child-of-rollout", "s-rollout-user", {"enabled": True}),
        ("child-of-off", "off-in-development", {"enabled": False}),
        ("child-of-variant", "strategy-variants", {"enabled": True, "variants": ["blue"]}),
    ):
        flag(child, {"name": "default"})
        answer = api.post(
            f"/api/admin/projects/default/features/{child}/dependencies", {"feature": parent, **needs}
        )
        assert answer.status == 200, answer.body


def answer_can_be_random(feature: dict[str, Any], features: dict[str, dict[str, Any]]) -> bool:
    """Whether some context's answer for `feature` (as the client API serves it) is drawn at random:
    gradualRolloutRandom, `random` stickiness, a rollout strictly between 0 and 100 % whose stickiness is
    `default` (random without userId and sessionId), variants that can be; or a parent that can be."""
    for strategy in feature.get("strategies") or []:
        parameters = strategy.get("parameters") or {}
        stickiness = parameters.get("stickiness") or "default"
        if strategy["name"] == "gradualRolloutRandom" or stickiness == "random":
            return True
        partial = 0 < int(parameters.get("rollout", "100")) < 100
        if strategy["name"] == "flexibleRollout" and stickiness == "default" and partial:
            return True
        if _variants_can_be_random(strategy.get("variants") or []):
            return True
    if _variants_can_be_random(feature.get("variants") or []):
        return True
    return any(
        answer_can_be_random(features[d["feature"]], features)
        for d in feature.get("dependencies") or []
        if d["feature"] in features
    )


def _variants_can_be_random(variants: list[dict[str, Any]]) -> bool:
    """Two or more variants picked by a stickiness a context can lack: `default` (userId, then
    sessionId, then at random), `random`, or a field other than remoteAddress, which always has a value
    (the connection's when the caller sends none)."""
    weighted = [v for v in variants if v.get("weight", 0) > 0]
    return len(weighted) > 1 and any(v.get("stickiness") != "remoteAddress" for v in weighted)


# ---- the processes ---------------------------------------------------------------------------------------


class Services:
    def __init__(
        self, server: ServerProcess, proxy: ProxyProcess, edge_process: EdgeProcess, flags: set[str]
    ):
        self.server, self.proxy, self.edge, self.flags = server, proxy, edge_process, flags

    def ask(
        self, method: str, query: str, body: dict[str, Any] | None, source: str, everything: bool = True
    ) -> dict[str, Any]:
        """Every service's answer to one request: {service: {flag: (enabled, variant, enabled, payload)}},
        from the route of every flag or of the enabled ones."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        data = _dumps(body) if body is not None else None
        answers = {}
        for name, port, path, key in (
            ("server", self.server.port, "/api/frontend", FRONTEND_TOKEN),
            ("proxy", self.proxy.port, "/proxy", PROXY_KEY),
            ("edge", self.edge.port, "/api/frontend", FRONTEND_TOKEN),
        ):
            path += "/all" if everything else ""
            target = f"{path}?{query}" if query else path
            status, _, answer = fetch(
                port, method, target, {**headers, "Authorization": key}, data, 10, source
            )
            assert status == 200, (name, method, target, body, status, answer[:300])
            answers[name] = {
                t["name"]: _outcome(t["enabled"], t["variant"])
                for t in orjson.loads(answer)["toggles"]
                if t["name"] in self.flags
            }
        if body is not None:
            answers["playground"] = self.playground(body.get("context", {}), source, everything)
        return answers

    def playground(self, context: dict[str, Any], source: str, everything: bool) -> dict[str, Any]:
        """The server's playground for the same context (the same parser); it has no caller's address to
        fall back on, so the connection's goes in where the context has none (an empty one counts as none)."""
        if not context.get("remoteAddress"):
            context = {**context, "remoteAddress": source}
        request = {"environment": "development", "projects": "*", "context": context}
        headers = {"Content-Type": "application/json", "Authorization": ADMIN_TOKEN}
        status, _, answer = fetch(
            self.server.port, "POST", "/api/admin/playground", headers, _dumps(request), 10, source
        )
        assert status == 200, ("playground", request, status, answer[:300])
        return {
            f["name"]: _outcome(f["isEnabled"], f["variant"])
            for f in orjson.loads(answer)["features"]
            if f["name"] in self.flags and (everything or f["isEnabled"])
        }


def _outcome(enabled: bool, variant: dict[str, Any]) -> tuple[Any, ...]:
    return enabled, variant["name"], variant["enabled"], variant.get("payload")


def _dumps(body: dict[str, Any]) -> bytes:
    """The body as JSON, each `Raw` number written as its text."""
    texts: list[str] = []

    def default(value: object) -> str:
        if not isinstance(value, Raw):
            raise TypeError(value)
        texts.append(value.text)
        return f"@raw{len(texts) - 1}@"

    data = orjson.dumps(body, default=default)
    for index, text in enumerate(texts):
        data = data.replace(f'"@raw{index}@"'.encode(), text.encode(), 1)
    return data


def _database(backend: str, tmp: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    if backend == "postgres":
        databases = PostgresDatabases()
        request.addfinalizer(databases.drop_all)
        return {"DATABASE_URL": databases.create()}
    return {"DATABASE_PATH": str(tmp / "flags.db")}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def services(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    tmp = Path(tmp_path_factory.mktemp("differential"))
    server = ServerProcess(
        base_env(**_database(request.param, tmp, request)), log_path=str(tmp / "server.log")
    )
    server.start()
    proxy = edge_process = None
    try:
        seed(server.api())
        served = server.api(CLIENT_TOKEN).client_features()["features"]
        by_name = {f["name"]: f for f in served}
        flags = {name for name, f in by_name.items() if not answer_can_be_random(f, by_name)}
        # The rule leaves out exactly the flags made to be random, and nothing else.
        assert set(by_name) - flags == {n for n in by_name if n.startswith("r-")}
        proxy = ProxyProcess(
            server.url, 60_000, log_path=str(tmp / "proxy.log"), extra_args=("--enable-all-endpoint",)
        ).start()
        edge_process = edge(server.url, [CLIENT_TOKEN])
        edge_process.wait_ready()
        services = Services(server, proxy, edge_process, flags)
        everything = services.ask("GET", "", None, SOURCES[0])
        assert all(set(answer) == flags for answer in everything.values()), everything  # all flags loaded
        yield services
    finally:
        if edge_process is not None:
            edge_process.stop()
        if proxy is not None:
            proxy.stop()
        assert server.stop() == 0


# ---- the contexts ----------------------------------------------------------------------------------------


class Raw:
    """A JSON number sent as this text (orjson writes 1e3 as 1000.0 and -0 as -0.0). Not a dataclass:
    orjson would write one as an object without asking `default`."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text!r})"


NUMBERS = st.one_of(
    st.sampled_from([1, 1.0, -0.0, 0, 1e3, 1000, 2.5, -5, 1e21, 0.1 + 0.2, 42]),
    st.sampled_from(
        ["1e3", "1E3", "-0", "-0.0", "1.50", "1e21", "1e-7", "0.000001", "9007199254740993", "1.5e300"]
    ).map(Raw),
)
TEXT = st.one_of(
    st.sampled_from(["", "1", "1.0", "eu", "EU", "us", "u1", "42", "acme", "1.2.3", "2.0.0-beta.1",
                     "admin@example.com", "ADMIN@EXAMPLE.COM", "x@y.org", "ümlaut@example.com", "s-1",
                     "127.0.0.7", "10.1.2.3", "::1", "not-an-address", "true"]),
    st.text(max_size=12),
    st.just("long-" * 80),  # 400 characters: a query of fourteen of them stays under 8 KB of request line
)  # fmt: skip
VALUES = st.one_of(TEXT, NUMBERS, st.booleans(), st.none())
TIMES = st.sampled_from(
    [
        "2024-06-01T12:00:00Z", "2024-06-01T11:59:59.999Z", "2024-06-01T12:00:00.001Z",
        "2024-06-01T14:00:00+02:00", "2024-06-01T13:59:59+02:00", "2024-06-01T12:00:00.5+00:00",
        "2024-06-01T12:00:00", "2024-06-01 12:00:01Z", "2030-01-01T00:00:00-05:00", "2001-01-01T00:00:00Z",
        "yesterday", "",
    ]
)  # fmt: skip
PROPERTY_NAMES = st.sampled_from(
    ["n", "region", "email", "version", "tenant", "userId", "sessionId", "remoteAddress", "currentTime"]
)
STANDARD = {
    "userId": st.one_of(TEXT, NUMBERS, st.none()),
    "sessionId": st.one_of(TEXT, st.integers(-3, 3), st.none()),
    "remoteAddress": st.one_of(st.sampled_from(["", "127.0.0.7", "10.9.8.7", "::1", "nonsense"]), st.none()),
    "currentTime": TIMES,
    "appName": TEXT,
    "environment": TEXT,
}


@st.composite
def contexts(draw: st.DrawFn, body: bool = True) -> dict[str, Any]:
    """A context as a caller sends it: standard fields (some absent), properties, and top-level
    non-standard fields that may share a name with a property, in a drawn order. A body may also carry
    one very long value (20,000 characters), more than a request line may."""
    fields: list[tuple[str, Any]] = []
    if body and draw(st.booleans()):
        fields.append((draw(st.sampled_from(["userId", "email", "sessionId"])), "z" * 20_000))
    for name, values in STANDARD.items():
        if draw(st.booleans()):
            fields.append((name, draw(values)))
    properties = draw(st.dictionaries(PROPERTY_NAMES, VALUES, max_size=5))
    top = draw(
        st.dictionaries(st.sampled_from(["n", "region", "email", "version", "tenant"]), VALUES, max_size=3)
    )
    fields += list(top.items())
    if properties or draw(st.booleans()):
        fields.insert(draw(st.integers(0, len(fields))), ("properties", properties))
    return dict(fields)


def _as_query(context: dict[str, Any]) -> str:
    """The context as a GET query (`properties[name]=value`), string values only: a query has no types."""
    parts = []
    for key, value in context.items():
        if key == "properties":
            parts += [f"properties[{quote(k)}]={quote(v)}" for k, v in value.items() if isinstance(v, str)]
        elif isinstance(value, str):
            parts.append(f"{quote(key)}={quote(value)}")
    return "&".join(parts)


def _disagreements(answers: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    server = answers["server"]
    flags = sorted(set().union(*answers.values()))
    return [
        (flag, {name: answer.get(flag) for name, answer in answers.items()})
        for flag in flags
        if any(answer.get(flag) != server.get(flag) for answer in answers.values())
    ]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(context=contexts(), source=st.sampled_from(SOURCES), everything=st.booleans())
def test_post_answers_agree(
    services: Services, context: dict[str, Any], source: str, everything: bool
) -> None:
    answers = services.ask("POST", "", {"context": context}, source, everything)
    assert _disagreements(answers) == [], context


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(context=contexts(body=False), source=st.sampled_from(SOURCES), everything=st.booleans())
def test_get_answers_agree(
    services: Services, context: dict[str, Any], source: str, everything: bool
) -> None:
    query = _as_query(context)
    answers = services.ask("GET", query, None, source, everything)
    assert _disagreements(answers) == [], query
