"""The playground's explaining evaluator (flagproxy/explain.py) gives the compiled evaluator's answers:
on/off, variant name and payload, for every flag of the benchmark snapshots and many contexts; and its
reasons say what decided (a constraint's compared value, a rollout's bucket against its percentage, a
segment, a dependency)."""

from __future__ import annotations

import pytest

from benchmarks.datasets import snapshot_payload, unique_context
from flagproxy.explain import explain
from flagproxy.snapshot import compile_snapshot


@pytest.mark.parametrize("size", [100, 1000])
def test_its_answers_are_the_compiled_evaluators(size):
    payload = snapshot_payload(size)
    snapshot = compile_snapshot(payload, implementation="compiled")
    assert snapshot.implementation == "compiled"
    contexts = [unique_context(i) for i in range(40)]
    # Contexts without a user or with other properties reach other branches (sessionId stickiness, NOT_IN).
    contexts += [{**c, "userId": None, "properties": {}} for c in contexts[:5]]
    contexts = [{k: v for k, v in c.items() if v is not None} for c in contexts]
    on = 0
    for context in contexts:
        for answer in explain(payload, context):
            expected = snapshot.get_variant(answer["name"], context)
            assert answer["isEnabled"] == expected["feature_enabled"], (answer["name"], context)
            assert answer["variant"]["name"] == expected["name"], (answer["name"], context)
            assert answer["variant"].get("payload") == expected.get("payload"), (answer["name"], context)
            on += answer["isEnabled"]
    assert 0 < on < size * len(contexts)  # both answers occur: the comparison means something


def _payload(strategies, *, segments=(), enabled=True, extra=()):
    return {
        "version": 2,
        "features": [
            {"name": "f", "enabled": enabled, "strategies": strategies, "variants": []},
            *extra,
        ],
        "segments": list(segments),
    }


def test_a_constraint_shows_the_value_it_compared_and_a_rollout_its_bucket():
    rollout = {
        "name": "flexibleRollout",
        "parameters": {"rollout": "30", "stickiness": "userId", "groupId": "f"},
        "constraints": [{"contextName": "country", "operator": "IN", "values": ["NO", "SE"]}],
    }
    payload = _payload([rollout])
    snapshot = compile_snapshot(payload, implementation="compiled")
    seen_on = seen_off = False
    for i in range(60):
        context = {"userId": f"u{i}", "properties": {"country": "NO"}}
        (answer,) = explain(payload, context)
        strategy = answer["strategies"][0]
        assert strategy["constraints"][0]["result"] is True
        assert strategy["constraints"][0]["contextValue"] == "NO"
        condition = strategy["condition"]
        assert condition["seed"] == f"u{i}" and condition["percentage"] == 30
        assert 1 <= condition["bucket"] <= 100
        assert answer["isEnabled"] == (condition["bucket"] <= 30) == snapshot.is_enabled("f", context)
        seen_on |= answer["isEnabled"]
        seen_off |= not answer["isEnabled"]
    assert seen_on and seen_off
    (answer,) = explain(payload, {"userId": "u1", "properties": {"country": "DK"}})
    assert answer["isEnabled"] is False and answer["reason"] == "no strategy matched"
    assert (
        answer["strategies"][0]["constraints"][0] | {"result": False, "contextValue": "DK"}
        == answer["strategies"][0]["constraints"][0]
    )
    assert answer["strategies"][0]["condition"]["note"].startswith("not evaluated")


def test_segments_dependencies_and_a_switched_off_flag_are_explained():
    segment = {
        "id": 7,
        "name": "beta",
        "constraints": [{"contextName": "userId", "operator": "IN", "values": ["a"]}],
    }
    parent = {"name": "parent", "enabled": False, "strategies": [{"name": "default"}], "variants": []}
    child = {
        "name": "child",
        "enabled": True,
        "strategies": [{"name": "default"}],
        "variants": [],
        "dependencies": [{"feature": "parent", "enabled": True}],
    }
    payload = _payload([{"name": "default", "segments": [7]}], segments=[segment], extra=[parent, child])
    answers = {a["name"]: a for a in explain(payload, {"userId": "a"})}
    assert answers["f"]["isEnabled"] is True and answers["f"]["decidedBy"] == 0
    assert (
        answers["f"]["strategies"][0]["segments"][0] | {"name": "beta", "result": True}
        == answers["f"]["strategies"][0]["segments"][0]
    )
    assert answers["parent"]["reason"] == "the flag is off in this environment"
    assert answers["child"]["isEnabled"] is False
    assert answers["child"]["dependencies"] == [
        {"feature": "parent", "enabled": True, "variants": [], "result": False}
    ]
    answers = {a["name"]: a for a in explain(payload, {"userId": "b"})}
    assert answers["f"]["isEnabled"] is False
    assert answers["f"]["strategies"][0]["segments"][0]["constraints"][0]["contextValue"] == "b"
