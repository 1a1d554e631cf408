"""The snapshot compiler against malformed and adversarial payloads: no crash, no hang past a stated
bound, every flag it cannot compile off with a warning naming it, and the good flags beside them answer
exactly as they do alone.

Two parts: hypothesis draws payloads where known good flags sit among generated hostile features and
segments (wrong types anywhere, unknown operators and strategies, huge numbers, NUL and surrogate-free
unicode), on both evaluators; and a fixed set of adversarial payloads (catastrophic regexes, dependency
cycles and a 5,000-deep chain, 5,000 segments on one strategy, 10,000 constraints, 2 MB values, numbers
past any float) is compiled and evaluated in a child process that must finish within BOUND_SECONDS.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flagproxy.snapshot import compile_snapshot
from tests.reliability.figures import FIGURES
from tests.reliability.scale import COMPILER_FUZZ_EXAMPLES

# The whole adversarial set, compiled and evaluated on both evaluators, in a child process: measured at
# about 1 s on the 2-core CI machine; the bound leaves room for a slow machine, never for a hang.
BOUND_SECONDS = 60


class Quiet:
    def warning(self, *args: Any) -> None:
        pass


OPERATORS = [
    "IN", "NOT_IN", "STR_CONTAINS", "STR_STARTS_WITH", "STR_ENDS_WITH", "NUM_EQ", "NUM_GT", "NUM_GTE",
    "NUM_LT", "NUM_LTE", "DATE_AFTER", "DATE_BEFORE", "SEMVER_EQ", "SEMVER_GT", "SEMVER_LT", "REGEX",
    "IN_CIDR", "NOPE", "",
]  # fmt: skip
STRATEGIES = [
    "default", "userWithId", "gradualRolloutUserId", "gradualRolloutSessionId", "gradualRolloutRandom",
    "flexibleRollout", "remoteAddress", "applicationHostname", "someCustomName",
]  # fmt: skip
FIELDS = ["userId", "sessionId", "remoteAddress", "currentTime", "appName", "environment", "region", "x"]
PARAMETERS = ["rollout", "stickiness", "groupId", "percentage", "userIds", "IPs", "hostNames"]

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
numbers_as_text = st.sampled_from(
    ["1e400", "-1e400", "NaN", "inf", "9" * 400, "0x10", "1_000", " 5 ", "", "5"]
)
texts = st.text(max_size=40) | numbers_as_text | st.sampled_from(["(a+)+$", "(", "[z-a]", "10.0.0.0/33"])
constraints = st.fixed_dictionaries(
    {"contextName": st.sampled_from(FIELDS) | junk, "operator": st.sampled_from(OPERATORS) | junk},
    optional={
        "values": st.lists(texts, max_size=5) | junk,
        "value": texts | junk,
        "inverted": st.booleans() | junk,
        "caseInsensitive": st.booleans() | junk,
    },
)
variants = st.fixed_dictionaries(
    {"name": st.text(max_size=10) | junk},
    optional={
        "weight": st.integers(min_value=-5, max_value=10**30) | junk,
        "weightType": st.sampled_from(["variable", "fix"]) | junk,
        "stickiness": st.sampled_from(["default", "userId", "x"]) | junk,
        "payload": st.fixed_dictionaries({"type": st.sampled_from(["string", "json"]), "value": texts})
        | junk,
        "overrides": st.lists(
            st.fixed_dictionaries({"contextName": st.sampled_from(FIELDS), "values": st.lists(texts)}) | junk,
            max_size=2,
        )
        | junk,
    },
)
strategies = st.fixed_dictionaries(
    {"name": st.sampled_from(STRATEGIES) | junk},
    optional={
        "parameters": st.dictionaries(st.sampled_from(PARAMETERS), texts | junk, max_size=4) | junk,
        "constraints": st.lists(constraints, max_size=4) | junk,
        "segments": st.lists(st.integers(min_value=1000, max_value=1010) | junk, max_size=3) | junk,
        "variants": st.lists(variants, max_size=3) | junk,
        "disabled": st.booleans() | junk,
    },
)
hostile_features = st.fixed_dictionaries(
    {"name": st.text(max_size=20).map(lambda name: "bad-" + name)},
    optional={
        "enabled": st.booleans() | junk,
        "strategies": st.lists(strategies, max_size=3) | junk,
        "variants": st.lists(variants, max_size=3) | junk,
        "dependencies": st.lists(
            st.fixed_dictionaries({"feature": st.text(max_size=8).map(lambda n: "bad-" + n) | junk})
            | st.fixed_dictionaries(
                {"feature": st.text(max_size=4).map(lambda n: "bad-" + n), "variants": junk, "enabled": junk}
            ),
            max_size=2,
        )
        | junk,
        "impressionData": junk,
    },
)
hostile_segments = st.fixed_dictionaries(
    {"id": st.integers(min_value=1000, max_value=1010) | st.text(max_size=3) | st.none()},
    optional={"constraints": st.lists(constraints, max_size=3) | junk},
)

GOOD_SEGMENT = {"id": 1, "constraints": [{"contextName": "region", "operator": "IN", "values": ["eu"]}]}
GOOD = [
    {"name": "good-on", "enabled": True, "strategies": [{"name": "default"}]},
    {
        "name": "good-rollout",
        "enabled": True,
        "strategies": [
            {
                "name": "flexibleRollout",
                "parameters": {"rollout": "50", "stickiness": "userId", "groupId": "g"},
                "constraints": [{"contextName": "appName", "operator": "STR_STARTS_WITH", "values": ["web"]}],
                "segments": [1],
            }
        ],
        "variants": [
            {"name": "a", "weight": 500, "weightType": "variable", "stickiness": "userId"},
            {"name": "b", "weight": 500, "weightType": "variable", "stickiness": "userId"},
        ],
    },
    {
        "name": "good-child",
        "enabled": True,
        "strategies": [{"name": "userWithId", "parameters": {"userIds": "1,2,3"}}],
        "dependencies": [{"feature": "good-on"}],
    },
]
CONTEXTS = [
    {},
    {"userId": "1", "appName": "web-shop", "properties": {"region": "eu"}},
    {"userId": "7", "appName": "web", "properties": {"region": "us", "x": "5"}},
    {"userId": "a" * 30 + "!", "sessionId": "s", "remoteAddress": "10.0.0.1"},
]


def answers(snapshot: Any, names: list[str]) -> list[Any]:
    return [
        (snapshot.is_enabled(name, context), str(snapshot.get_variant(name, context)))
        for context in CONTEXTS
        for name in names
    ]


@settings(
    max_examples=COMPILER_FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    features=st.lists(hostile_features | junk, max_size=6),
    segments=st.lists(hostile_segments | junk, max_size=3) | junk,
    where=st.integers(min_value=0, max_value=6),
)
def test_hostile_features_beside_good_ones(implementation: str, features, segments, where) -> None:
    FIGURES.hostile_input("compiler: generated hostile payloads (hypothesis)")
    names = [flag["name"] for flag in GOOD]
    alone = compile_snapshot(
        {"version": 2, "features": GOOD, "segments": [GOOD_SEGMENT]}, implementation=implementation
    )
    mixed = features[:where] + GOOD + features[where:]
    all_segments = [GOOD_SEGMENT, *(segments if isinstance(segments, list) else [])]
    payload = {"version": 2, "features": mixed, "segments": all_segments}
    snapshot = compile_snapshot(
        json.loads(json.dumps(payload)), implementation=implementation, logger=Quiet()
    )
    assert answers(snapshot, names) == answers(alone, names)
    for context in CONTEXTS:
        body, _ = snapshot.evaluate_all_body(context)
        enabled = {toggle["name"] for toggle in json.loads(body)["toggles"]}
        # Every flag the compiler gave up on is named by a warning and is off.
        for feature in features:
            name = feature.get("name") if isinstance(feature, dict) else None
            if isinstance(name, str) and any(repr(name) in warning for warning in snapshot.warnings):
                assert name not in enabled
                assert not snapshot.is_enabled(name, context)


def test_adversarial_payloads_compile_and_answer_within_the_bound() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.adversarial"],
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert len(report) == 14
    assert all(case["warned_off"] for case in report.values()), report
    # What the compiler refuses is refused with a warning: an unbounded rollout, weights past the total,
    # a number that is not one (the NUM operators take strings).
    assert report["compiled: huge numbers"]["warnings"] >= 3, report
    FIGURES.hostile_input("compiler: adversarial payloads (fixed set)", len(report))
    slowest = max(report.items(), key=lambda item: item[1]["seconds"])
    FIGURES.notes["compiler: slowest adversarial payload"] = (
        f"{slowest[1]['seconds']:.2f} s ({slowest[0]}); bound {BOUND_SECONDS} s for the whole set"
    )


# --- regressions: what this campaign found -----------------------------------------------------------


def test_feature_variants_given_as_an_object_make_that_flag_off_with_a_warning(implementation: str) -> None:
    """Found by the fuzz: `"variants": {"a": 1}` on a feature raised KeyError out of compile_snapshot (the
    broken-flag fallback did not catch it), so one such flag made the proxy refuse the whole document."""
    payload = {"version": 2, "features": [*GOOD, {"name": "odd", "enabled": True, "variants": {"a": 1}}]}
    snapshot = compile_snapshot(payload, implementation=implementation, logger=Quiet())
    assert any("'odd'" in warning and "variants must be a list" in warning for warning in snapshot.warnings)
    assert not snapshot.is_enabled("odd", {})
    assert snapshot.is_enabled("good-on", {})


REPETITION = textwrap.dedent(
    """
    import sys
    from flagproxy.snapshot import compile_snapshot
    def flag(name, pattern):
        constraint = {"contextName": "userId", "operator": "REGEX", "value": pattern}
        strategy = {"name": "default", "constraints": [constraint]}
        return {"name": name, "enabled": True, "strategies": [strategy]}
    features = [
        flag("huge", "a{1000000000}"), flag("nested", "((a{100}){100}){100}"), flag("fine", "^a{3}$")
    ]
    snapshot = compile_snapshot({"version": 2, "features": features}, implementation=sys.argv[1])
    print([snapshot.is_enabled(name, {"userId": "aaa"}) for name in ("huge", "nested", "fine")])
    """
)


def test_a_regex_whose_repetitions_expand_past_the_bound_is_refused_not_expanded(implementation: str) -> None:
    """Found by the adversarial set: a REGEX constraint `a{1000000000}` made the regex module expand it
    while the snapshot compiled, until the process ran out of memory (and `(a{1000}){1000}` took a second
    per pattern). Such a pattern is refused as the Rust crate refuses it (compiled size limit): no match."""
    done = subprocess.run(
        [sys.executable, "-c", REPETITION, implementation],
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[False,", "False,", "True]"]


def test_a_variant_payload_that_cannot_be_rendered_makes_that_flag_off_with_a_warning(
    implementation: str,
) -> None:
    """Found by the long fuzz: a payload handed over as Python objects holding an integer past 64 bits
    (a document parsed from bytes never does: orjson reads it as a float) raised TypeError out of
    compile_snapshot while the answer fragments were rendered, so the whole document was refused."""
    variants = [{"name": "v", "weight": 1000, "payload": {"type": "json", "value": 2**70}}]
    odd = {"name": "odd", "enabled": True, "strategies": [{"name": "default"}], "variants": variants}
    strategy_level = {
        "name": "odd-strategy",
        "enabled": True,
        "strategies": [{"name": "default", "variants": [{**variants[0], "payload": {"n": -(2**64)}}]}],
    }
    payload = {"version": 2, "features": [*GOOD, odd, strategy_level]}
    snapshot = compile_snapshot(payload, implementation=implementation, logger=Quiet())
    for name in ("odd", "odd-strategy"):
        assert any(f"'{name}'" in w and "invalid payload" in w for w in snapshot.warnings), snapshot.warnings
        assert not snapshot.is_enabled(name, {})
    assert snapshot.is_enabled("good-on", {})
