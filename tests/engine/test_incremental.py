"""A streamed state's engine patched event by event (flagproxy/compiler/incremental.py, Engine.patched)
answers exactly as the engine compiled whole from the same state: bodies, validity and named lookups, for
both evaluators, after random sequences of updates, removals, re-additions, segment edits and hydrations;
and the compiled one's image (what workers load) answers the same.

A differential test: the other side is no oracle of what is right. Each evaluator is pinned on its own by
independent answers (tests/conformance: the client specification's cases for both; tests/engine/
test_semantics.py: published MurmurHash3 vectors and the Node SDK's buckets); this adds agreement on inputs
no fixed case covers."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flagproxy.compiler.delta import DeltaState
from flagproxy.compiler.incremental import IncrementalEngine
from flagproxy.evaluator import CACHE_NEVER, CACHE_SNAPSHOT, IMPLEMENTATION
from flagproxy.snapshot import compile_snapshot
from tests.engine.test_agreement import NAMES, constraint, context, feature

IMPLEMENTATIONS = ["pure"] + (["compiled"] if IMPLEMENTATION == "compiled" else [])

segment = st.fixed_dictionaries({"id": st.integers(1, 3), "constraints": st.lists(constraint, max_size=2)})
event = st.one_of(
    st.builds(lambda f: {"type": "feature-updated", "feature": f}, feature),
    st.builds(lambda f: {"type": "feature-updated", "feature": f}, feature),
    st.builds(
        lambda n: {"type": "feature-removed", "featureName": n, "project": "default"}, st.sampled_from(NAMES)
    ),
    st.builds(lambda s: {"type": "segment-updated", "segment": s}, segment),
    st.builds(lambda i: {"type": "segment-removed", "segmentId": i}, st.integers(1, 3)),
)
hydration = st.builds(
    lambda features, segments: {"type": "hydration", "features": features, "segments": segments},
    st.lists(feature, max_size=6),
    st.lists(segment, max_size=3),
)
batches = st.lists(
    st.one_of(st.lists(event, min_size=1, max_size=3), st.builds(lambda h: [h], hydration)),
    min_size=1,
    max_size=8,
)


def _answers(engine: Any, contexts: list[dict[str, Any]]) -> list[Any]:
    """Every body an engine gives the contexts, three times each (the compiled engine plans a context from
    its second request on: tests/engine/test_plans.py); a random answer (CACHE_NEVER) only as such."""
    asked = [*NAMES, "missing"]
    found: list[Any] = []
    for ctx in contexts:
        for user_ctx in (ctx, {**ctx, "userId": "another"}):
            for _ in range(3):
                for include_disabled in (False, True):
                    body, valid_in = engine.evaluate_all_body(user_ctx, include_disabled)
                    found.append(_kept(valid_in, body))
                body, valid_in, outcomes = engine.evaluate_named_body(user_ctx, asked)
                found.append(_kept(valid_in, (body, outcomes)))
    return found


def _kept(valid_in: int, answer: Any) -> Any:
    if valid_in == CACHE_NEVER:  # random answers differ call to call
        return CACHE_NEVER
    return (valid_in if valid_in <= CACHE_SNAPSHOT else 1, answer)  # the second may tick in between


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=hydration, changes=batches, contexts=st.lists(context, min_size=1, max_size=3))
def test_a_patched_engine_answers_as_a_whole_build(
    implementation: str,
    first: dict[str, Any],
    changes: list[list[dict[str, Any]]],
    contexts: list[dict[str, Any]],
) -> None:
    held = IncrementalEngine(hostname="host", implementation=implementation)
    held.apply([first])
    for events in changes:
        held.apply(events)
        whole = compile_snapshot(held.state.document(), hostname="host", implementation=implementation).engine
        assert held.engine.names == whole.names
        assert _answers(held.engine, contexts) == _answers(whole, contexts)
    if implementation == "compiled":
        loaded = pickle.loads(pickle.dumps(held.engine))
        assert _answers(loaded, contexts) == _answers(held.engine, contexts)


def test_an_unchanged_feature_keeps_the_engine() -> None:
    held = IncrementalEngine(hostname="host")
    flag = {"name": "a", "enabled": True, "strategies": [{"name": "default"}]}
    held.apply([{"type": "hydration", "features": [flag], "segments": []}])
    engine = held.engine
    assert held.apply([{"type": "feature-updated", "feature": dict(flag)}]) is False
    assert held.engine is engine
    assert held.apply([{"type": "feature-updated", "feature": {**flag, "enabled": False}}]) is True
    assert held.engine is not engine
    assert held.engine.is_enabled("a", {}) is False


def test_many_replacements_build_whole_again() -> None:
    held = IncrementalEngine(hostname="host")
    flags = [{"name": f"f{i}", "enabled": True} for i in range(3)]
    held.apply([{"type": "hydration", "features": flags, "segments": []}])
    for round_ in range(4):
        held.apply([{"type": "feature-updated", "feature": {**flags[0], "enabled": round_ % 2 == 0}}])
    assert held.replaced <= len(flags)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_parent_that_comes_and_goes_moves_its_children(implementation: str) -> None:
    held = IncrementalEngine(hostname="host", implementation=implementation)
    child = {"name": "child", "enabled": True, "dependencies": [{"feature": "parent"}]}
    other = {"name": "other", "enabled": True, "dependencies": [{"feature": "last"}]}
    last = {"name": "last", "enabled": True}
    held.apply([{"type": "hydration", "features": [child, other, last], "segments": []}])
    assert held.engine.is_enabled("child", {}) is False  # its parent is missing
    held.apply([{"type": "feature-updated", "feature": {"name": "parent", "enabled": True}}])
    assert held.engine.is_enabled("child", {}) is True
    held.apply([{"type": "feature-removed", "featureName": "child"}])  # "last" moves up one place
    assert held.engine.is_enabled("other", {}) is True
    held.apply([{"type": "feature-updated", "feature": {**last, "enabled": False}}])
    assert held.engine.is_enabled("other", {}) is False
    held.apply([{"type": "feature-removed", "featureName": "last"}])
    assert held.engine.names == ("other", "parent")
    assert held.engine.is_enabled("other", {}) is False


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_flag_removed_and_added_in_one_batch_goes_last(implementation: str) -> None:
    held = IncrementalEngine(hostname="host", implementation=implementation)
    a, b = {"name": "a", "enabled": True}, {"name": "b", "enabled": False}
    held.apply([{"type": "hydration", "features": [a, b], "segments": []}])
    held.apply([{"type": "feature-removed", "featureName": "a"}, {"type": "feature-updated", "feature": a}])
    assert held.engine.names == ("b", "a")
    body, _ = held.engine.evaluate_all_body({}, True)
    assert (
        body == compile_snapshot(held.state.document(), hostname="host").engine.evaluate_all_body({}, True)[0]
    )


@settings(max_examples=300, deadline=None)
@given(first=hydration, changes=batches)
def test_delta_state_says_whether_the_state_changed(first: dict[str, Any], changes: list[list[Any]]) -> None:
    """DeltaState.apply compares only what the events name: it says what comparing everything would."""
    state = DeltaState()
    state.apply([first])
    for events in changes:
        before = (list(state.features.items()), list(state.segments.items()))
        changed = state.apply(events)
        assert changed == (before != (list(state.features.items()), list(state.segments.items())))


def test_an_edit_no_flag_reads_keeps_the_engine_and_changes_the_state() -> None:
    held = IncrementalEngine(hostname="host")
    flag = {"name": "a", "enabled": True, "strategies": [{"name": "default"}], "description": "one"}
    held.apply([{"type": "hydration", "features": [flag], "segments": []}])
    engine = held.engine
    assert not held.apply([{"type": "feature-updated", "feature": {**flag, "description": "two"}}])
    assert held.state_changed and held.engine is engine
    assert held.state.features["a"]["description"] == "two"
    assert held.apply([{"type": "feature-updated", "feature": {**flag, "enabled": 1}}])  # not `true`


def test_without_whole_builds_the_engine_is_dropped_and_adopted_back() -> None:
    flags = [{"name": f"f{n}", "enabled": True, "strategies": [{"name": "default"}]} for n in range(3)]
    held = IncrementalEngine(hostname="host", whole_builds=False)
    hydration = {"type": "hydration", "features": flags, "segments": []}
    assert held.apply([hydration]) and held.engine is None
    whole = compile_snapshot(held.state.document(), hostname="host").engine
    held.adopt(held.state, whole)
    for n in range(3):  # each replaces a flag: the fourth replacement would outnumber the flags
        assert held.apply([{"type": "feature-updated", "feature": {**flags[n], "enabled": False}}])
        assert held.engine is not None and held.engine is not whole
    assert held.apply([{"type": "feature-updated", "feature": flags[0]}]) and held.engine is None
