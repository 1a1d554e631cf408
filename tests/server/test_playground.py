"""`POST /api/admin/playground` through HTTP on SQLite and PostgreSQL: Unleash's request and response
shapes, the answers of the SDK payload for that environment (equal to the compiled evaluator's for a
benchmark snapshot authored through the API), `?explain=true` reasons, who may call it and what bad input
gets."""

from __future__ import annotations

from pathlib import Path

from benchmarks.datasets import snapshot_payload, unique_context
from tests.sdk.oracle import depends_on_randomness, python_answers
from tests.server.harness import CLIENT_TOKEN, Api, ServerProcess, assert_error, unique

PLAYGROUND = "/api/admin/playground"


def flag_with_rollout(api: Api, project: str = "default") -> str:
    """A new flag on in development: 30% of users by userId, only where country is NO."""
    name = unique("pg")
    api.create_feature(name, project)
    api.add_strategy(
        name,
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "30", "stickiness": "userId"},
            "constraints": [{"contextName": "country", "operator": "IN", "values": ["NO"]}],
        },
        project=project,
    )
    api.switch(name, True, project=project)
    return name


def _answer(api: Api, name: str, context: dict, explain: bool = False, environment: str = "development"):
    body = {"environment": environment, "projects": ["default"], "context": context}
    answer = api.post(PLAYGROUND + ("?explain=true" if explain else ""), body)
    assert answer.status == 200, answer.body
    return answer.json(), next(f for f in answer.json()["features"] if f["name"] == name)


def test_answers_follow_the_rollout_and_the_constraint(api: Api):
    name = flag_with_rollout(api)
    on = off = 0
    for i in range(40):
        document, feature = _answer(api, name, {"userId": f"user-{i}", "properties": {"country": "NO"}})
        assert document["input"]["environment"] == "development"
        assert set(feature) == {
            "name", "projectId", "isEnabled", "isEnabledInCurrentEnvironment", "hasUnsatisfiedDependency",
            "strategies", "variant", "variants",
        }  # fmt: skip
        strategy = feature["strategies"]["data"][0]
        assert strategy["result"] == {"enabled": feature["isEnabled"], "evaluationStatus": "complete"}
        assert (
            strategy["constraints"][0]["result"] is True and "contextValue" not in strategy["constraints"][0]
        )
        assert feature["variant"] == {"name": "disabled", "enabled": False}
        on += feature["isEnabled"]
        off += not feature["isEnabled"]
    assert on and off  # 30%: some of 40 users are in, some are out
    _, feature = _answer(api, name, {"userId": "user-1", "properties": {"country": "SE"}})
    assert feature["isEnabled"] is False
    assert feature["strategies"]["data"][0]["constraints"][0]["result"] is False


def test_explain_adds_the_compared_value_the_bucket_and_the_reason(api: Api):
    name = flag_with_rollout(api)
    _, feature = _answer(api, name, {"userId": "user-7", "properties": {"country": "NO"}}, explain=True)
    strategy = feature["strategies"]["data"][0]
    assert strategy["constraints"][0]["contextValue"] == "NO"
    condition = strategy["condition"]
    assert condition["seed"] == "user-7" and condition["percentage"] == 30 and condition["groupId"] == name
    assert feature["isEnabled"] == (condition["bucket"] <= 30)
    assert feature["reason"] == (
        "strategy 1 (flexibleRollout) matched" if feature["isEnabled"] else "no strategy matched"
    )
    _, off = _answer(api, name, {"userId": "user-7"}, explain=True, environment="production")
    assert off["isEnabled"] is False and off["isEnabledInCurrentEnvironment"] is False
    assert off["reason"] == "the flag is off in this environment"


def test_a_viewer_may_ask_and_bad_input_is_a_clear_400(api: Api):
    _, viewer_token = api.user_with_token(3)
    viewer = Api(api.port, viewer_token)
    body = {"environment": "development", "context": {}}
    assert viewer.post(PLAYGROUND, body).status == 200
    assert_error(Api(api.port, None).post(PLAYGROUND, body), 401, "AuthenticationRequired")
    assert_error(api.post(PLAYGROUND, {"context": {}}), 400, "ValidationError", "environment")
    assert_error(
        api.post(PLAYGROUND, {**body, "projects": [unique("nope")]}), 400, "ValidationError", "projects[0]"
    )
    assert_error(api.post(PLAYGROUND, {**body, "projects": "some"}), 400, "ValidationError", "projects")
    bad_properties = {**body, "context": {"properties": [1]}}
    assert_error(api.post(PLAYGROUND, bad_properties), 400, "ValidationError", "context.properties")
    assert_error(api.post(PLAYGROUND, {**body, "environment": unique("env")}), 404, "NotFoundError")
    assert_error(
        api.post(PLAYGROUND, body=b"{}", headers={"Content-Type": "text/plain"}), 415, "ContentTypeerror"
    )


def test_a_disabled_strategy_is_listed_in_its_place_and_never_evaluated(api: Api):
    name = unique("pgd")
    api.create_feature(name)
    api.add_strategy(name, {"name": "default", "disabled": True})
    api.add_strategy(name, {"name": "userWithId", "parameters": {"userIds": "ann"}})
    api.switch(name, True)
    _, feature = _answer(api, name, {"userId": "ann"}, explain=True)
    disabled, decided = feature["strategies"]["data"]
    assert disabled["disabled"] is True
    assert disabled["result"] == {"enabled": "unknown", "evaluationStatus": "unevaluated"}
    assert decided["result"] == {"enabled": True, "evaluationStatus": "complete"}
    assert feature["isEnabled"] is True and feature["decidedBy"] == 1
    assert feature["reason"] == "strategy 2 (userWithId) matched"
    _, other = _answer(api, name, {"userId": "bob"})
    assert (
        other["isEnabled"] is False and other["strategies"]["result"] is False
    )  # the disabled one is not on


def _load_benchmark_snapshot(api: Api, size: int) -> tuple[str, dict[str, str]]:
    """The benchmark snapshot of `size` flags authored through the admin API into a new project (names
    made unique, segments renumbered); returns the project and the benchmark name -> stored name."""
    payload = snapshot_payload(size)
    project = unique("bench")
    assert api.post("/api/admin/projects", {"id": project, "name": project}).status == 201
    segments = {
        s["id"]: api.create_segment(unique(s["name"]), s["constraints"], project=project)["id"]
        for s in payload["segments"]
    }
    names = {f["name"]: unique(f["name"].replace(".", "-")) for f in payload["features"]}
    for feature in payload["features"]:
        name = names[feature["name"]]
        api.create_feature(name, project)
        for strategy in feature["strategies"]:
            body = {**strategy, "segments": [segments[i] for i in strategy.get("segments", [])]}
            api.add_strategy(name, body, project=project)
        if feature["variants"]:
            path = f"/api/admin/projects/{project}/features/{name}/environments/development/variants"
            assert api.put(path, feature["variants"]).status == 200
        if feature["enabled"]:
            api.switch(name, True, project=project)
    for feature in payload["features"]:
        for dependency in feature["dependencies"]:
            path = f"/api/admin/projects/{project}/features/{names[feature['name']]}/dependencies"
            body = {**dependency, "feature": names[dependency["feature"]]}
            assert api.post(path, body).status == 200
    return project, names


def test_its_answers_are_the_python_sdks_over_what_the_proxies_get(
    server: ServerProcess, api: Api, tmp_path: Path
):
    """A benchmark snapshot authored through the API: for each context, the playground's answer of every
    flag (on/off, variant, payload) is the official Python SDK's, reading the client API of that environment
    (what a proxy reads). Flags that draw at random are left out."""
    project, names = _load_benchmark_snapshot(api, 100)
    features = api.client_features(CLIENT_TOKEN, f"?project={project}")
    assert len(features["features"]) == len(names)
    flags = [f["name"] for f in features["features"] if not depends_on_randomness(f)]
    contexts = [{k: v for k, v in unique_context(i).items() if v is not None} for i in range(12)]
    sdk = python_answers(
        f"{server.url}/api", CLIENT_TOKEN, flags, contexts, unique("playground-oracle"), tmp_path
    )
    on = 0
    for context, expected in zip(contexts, sdk, strict=True):
        body = {"environment": "development", "projects": [project], "context": context}
        answer = api.post(PLAYGROUND, body)
        assert answer.status == 200, answer.body
        answered = {feature["name"]: feature for feature in answer.json()["features"]}
        assert len(answered) == len(names)
        for flag in flags:
            enabled, variant = expected[flag]
            feature = answered[flag]
            assert feature["isEnabled"] == enabled, (flag, context)
            assert feature["variant"]["name"] == variant["name"], (flag, context)
            assert feature["variant"].get("payload") == variant.get("payload"), (flag, context)
            on += feature["isEnabled"]
    assert len(flags) > len(names) // 2
    assert 0 < on < len(flags) * len(contexts)  # both answers occur: the comparison means something


def test_the_context_is_read_as_the_frontend_api_reads_it(api: Api):
    """One parser for the playground, the frontend API, the proxy and edge: 1.0 is "1", null is "", the
    property wins over a top-level field of the same name, an object is a 400 naming the field."""
    name = unique("pg")
    api.create_feature(name)
    constraints = [
        {"contextName": "n", "operator": "IN", "values": ["1"]},
        {"contextName": "region", "operator": "IN", "values": ["eu"]},
    ]
    api.add_strategy(name, {"name": "default", "parameters": {}, "constraints": constraints})
    api.switch(name, True)
    context = {"n": 1.0, "region": "us", "properties": {"region": "eu", "empty": None}}
    _, feature = _answer(api, name, context)
    assert feature["isEnabled"] is True
    body = {"environment": "development", "context": {"userId": {"a": 1}}}
    assert_error(api.post(PLAYGROUND, body), 400, "ValidationError", "context.userId")
