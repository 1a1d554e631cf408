"""The compiled and pure evaluators give byte-identical answers on random snapshots and contexts.

A differential test: the other side is no oracle of what is right. Each evaluator is pinned on its own by
independent answers (tests/conformance: the client specification's cases for both; tests/engine/
test_semantics.py: published MurmurHash3 vectors and the Node SDK's buckets); this adds agreement on inputs
no fixed case covers."""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flagproxy.evaluator import CACHE_NEVER, CACHE_SNAPSHOT
from flagproxy.snapshot import compile_snapshot

NAMES = [f"f{i}" for i in range(6)]
WORDS = st.sampled_from(
    [
        "a",
        "b",
        "Ab",
        "1",
        "2.0",
        "1.2.3",
        "2.0.0-rc.1",
        "v1.0.0",
        "",
        " x ",
        "héllo",
        "10.0.0.1",
        "::1",
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00.000Z",
        "abc\\",
    ]
)
FIELDS = st.sampled_from(
    [
        "userId",
        "sessionId",
        "appName",
        "environment",
        "remoteAddress",
        "currentTime",
        "region",
        "age",
        "properties",
    ]
)
OPERATORS = st.sampled_from(
    [
        "IN",
        "NOT_IN",
        "STR_STARTS_WITH",
        "STR_ENDS_WITH",
        "STR_CONTAINS",
        "NUM_EQ",
        "NUM_GT",
        "NUM_LTE",
        "DATE_AFTER",
        "DATE_BEFORE",
        "SEMVER_EQ",
        "SEMVER_GT",
        "SEMVER_LTE",
        "REGEX",
        "IN_CIDR",
        "BOGUS",
    ]
)
PERCENT = st.sampled_from(["0", "1", "50", "99", "100", "+7", "50.5", "150", "", "x"])

constraint = st.fixed_dictionaries(
    {"contextName": FIELDS, "operator": OPERATORS},
    optional={
        "values": st.lists(WORDS, max_size=3),
        "value": WORDS,
        "inverted": st.booleans(),
        "caseInsensitive": st.booleans(),
    },
)
variant = st.fixed_dictionaries(
    {"name": st.sampled_from(["red", "blue", "green", "disabled"]), "weight": st.integers(0, 1000)},
    optional={
        "payload": st.fixed_dictionaries({"type": st.sampled_from(["string", "json"]), "value": WORDS}),
        # "currentTime" is not a variant stickiness field: it reads properties["currentTime"].
        "stickiness": st.sampled_from(["default", "userId", "sessionId", "region", "appName", "currentTime"]),
        "overrides": st.lists(
            st.fixed_dictionaries({"contextName": FIELDS, "values": st.lists(WORDS, max_size=2)}), max_size=2
        ),
    },
)
strategy = st.fixed_dictionaries(
    {
        "name": st.sampled_from(
            [
                "default",
                "userWithId",
                "gradualRolloutUserId",
                "gradualRolloutSessionId",
                "flexibleRollout",
                "gradualRolloutRandom",
                "remoteAddress",
                "applicationHostname",
                "unknownOne",
            ]
        ),
        "parameters": st.fixed_dictionaries(
            {},
            optional={
                "rollout": PERCENT,
                "percentage": PERCENT,
                "groupId": WORDS,
                "userIds": WORDS,
                "IPs": st.sampled_from(["10.0.0.0/8", "::1, 192.invalid", "127.0.0.1"]),
                "stickiness": st.sampled_from(
                    ["default", "userId", "sessionId", "region", "currentTime", "random"]
                ),
            },
        ),
    },
    optional={
        "constraints": st.lists(constraint, max_size=3),
        "segments": st.lists(st.integers(1, 3), max_size=2),
        "variants": st.lists(variant, max_size=3),
        "disabled": st.booleans(),
    },
)
feature = st.fixed_dictionaries(
    {"name": st.sampled_from(NAMES), "enabled": st.booleans()},
    optional={
        "strategies": st.lists(strategy, max_size=3),
        "variants": st.lists(variant, max_size=3),
        "impressionData": st.booleans(),
        "dependencies": st.lists(
            st.fixed_dictionaries(
                {"feature": st.sampled_from([*NAMES, "missing"])},
                optional={
                    "enabled": st.booleans(),
                    "variants": st.lists(st.sampled_from(["red", "blue", "disabled"]), max_size=2),
                },
            ),
            max_size=2,
        ),
    },
)
payload = st.fixed_dictionaries(
    {
        "version": st.just(2),
        "features": st.lists(feature, max_size=6),
        "segments": st.lists(
            st.fixed_dictionaries({"id": st.integers(1, 3), "constraints": st.lists(constraint, max_size=2)}),
            max_size=3,
        ),
    }
)
context = st.fixed_dictionaries(
    {},
    optional={
        "userId": WORDS,
        "sessionId": WORDS,
        "appName": WORDS,
        "environment": WORDS,
        "remoteAddress": WORDS,
        "currentTime": WORDS,
        "region": st.one_of(WORDS, st.integers(), st.none()),  # only a string is promoted to a property
        "properties": st.dictionaries(
            st.sampled_from(["region", "age", "userId", "sessionId", "currentTime", "properties"]),
            st.one_of(WORDS, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans()),
            max_size=3,
        ),
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payload, contexts=st.lists(context, min_size=1, max_size=4))
def test_compiled_and_pure_agree(payload: dict[str, Any], contexts: list[dict[str, Any]]) -> None:
    compiled = compile_snapshot(payload, implementation="compiled", hostname="host-a")
    pure = compile_snapshot(payload, implementation="pure", hostname="host-a")
    # What a worker serves: the compiled engine rebuilt from its image (flagproxy/image.py).
    imaged = pickle.loads(pickle.dumps(compiled.engine, protocol=5))
    assert compiled.warnings == pure.warnings
    assert compiled.names == pure.names == imaged.names
    for ctx in contexts:
        # Three times each: the compiled evaluator plans a context from its second request on (see
        # test_plans.py), and other users of the same context share that plan.
        for user_ctx in (ctx, {**ctx, "userId": "another"}):
            for include_disabled in (False, True):
                body_p, valid_p = pure.evaluate_all_body(user_ctx, include_disabled)
                for _ in range(3):
                    for engine in (compiled, imaged):
                        body_c, valid_c = engine.evaluate_all_body(user_ctx, include_disabled)
                        assert _validity(valid_c) == _validity(valid_p)
                        if valid_c != CACHE_NEVER:  # random answers differ call to call
                            assert body_c == body_p
        names = [*NAMES[:4], "unknown", NAMES[0]]
        body_p, valid_p, outcomes_p = pure.evaluate_named_body(ctx, names)
        for engine in (compiled, imaged):
            body_c, valid_c, outcomes_c = engine.evaluate_named_body(ctx, names)
            assert _validity(valid_c) == _validity(valid_p)
            if valid_c != CACHE_NEVER:
                assert (body_c, outcomes_c) == (body_p, outcomes_p)


def _validity(valid_in: int) -> int:
    """The kind of a valid_in: the second itself may tick between the two evaluators' calls."""
    assert isinstance(valid_in, int)
    return valid_in if valid_in <= CACHE_SNAPSHOT else 1
