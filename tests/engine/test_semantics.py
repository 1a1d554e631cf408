"""Evaluation decisions the conformance suite does not pin down (evaluation.md sections 8, 12 and B3),
and the byte format of the proxy's bodies. Each runs against both evaluators."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from flagproxy import _murmur_py
from flagproxy.compiler.model import VARIANT_SEED
from flagproxy.evaluator import CACHE_NEVER, CACHE_SNAPSHOT
from flagproxy.snapshot import compile_snapshot
from tests.reference import recorded_body, sample_payload
from tests.sdk.oracle import MURMUR3_VECTORS, PUBLISHED_BUCKETS, sdk_buckets


def flag(name: str = "f", strategies: Any = None, **extra: Any) -> dict[str, Any]:
    feature: dict[str, Any] = {"name": name, "enabled": True, "strategies": strategies or [], "variants": []}
    feature.update(extra)
    return feature


def snap(implementation: str, *features: dict[str, Any], **kwargs: Any):
    return compile_snapshot(
        {"version": 2, "features": list(features), **kwargs}, implementation=implementation
    )


FLEX = {"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "default"}}
DEFAULT = {"name": "default", "parameters": {}}


def constrained(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"name": "default", "parameters": {}, "constraints": list(constraints)}


# ------------------------------------------------------------------------------ whole-toggle failure


@pytest.mark.parametrize(
    "bad",
    [
        constrained({"contextName": "x", "operator": "NOPE", "values": ["a"]}),
        {"name": "default", "parameters": {}, "segments": [404]},
        constrained({"contextName": "x", "operator": "NUM_GT", "value": "abc"}),
        constrained(
            {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2024-01-01T00:00:00.000000Z"}
        ),
        constrained({"contextName": "x", "operator": "STR_CONTAINS", "values": []}),
        {"name": "flexibleRollout", "parameters": {"rollout": "150"}},
    ],
)
def test_one_broken_strategy_turns_the_whole_flag_off(implementation: str, bad: dict, caplog) -> None:
    caplog.set_level(logging.WARNING)
    s = snap(
        implementation,
        flag("broken", [bad, DEFAULT], variants=[{"name": "v", "weight": 1}]),
        flag("ok", [DEFAULT]),
    )
    assert not s.is_enabled("broken", {"userId": "1", "x": "5"})
    assert s.get_variant("broken", {}) == {"name": "disabled", "enabled": False, "feature_enabled": False}
    assert s.is_enabled("ok", {})  # the rest of the update goes on
    assert len(s.warnings) == 1 and "'broken'" in s.warnings[0]
    assert "'broken'" in caplog.text


def test_numbers_too_big_for_yggdrasil_break_one_flag_not_the_snapshot(implementation: str) -> None:
    huge = [{"name": "a", "weight": 2**32 - 1}, {"name": "b", "weight": 1}]
    s = snap(
        implementation,
        flag("heavy", [DEFAULT], variants=huge),
        flag("always", [{"name": "gradualRolloutRandom", "parameters": {"percentage": "99999999999"}}]),
    )
    assert not s.is_enabled("heavy", {}) and len(s.warnings) == 1 and "'heavy'" in s.warnings[0]
    assert all(s.is_enabled("always", {}) for _ in range(20))


def test_a_payload_that_is_not_a_features_document_is_refused() -> None:
    for bad in ({"nope": 1}, [1, 2], b"{not json", {"features": "x"}):
        with pytest.raises(ValueError):
            compile_snapshot(bad)  # type: ignore[arg-type]


def test_malformed_features_are_skipped_or_off(implementation: str) -> None:
    s = snap(
        implementation,
        {"enabled": True},
        "junk",
        flag("f", [{"name": "default", "parameters": "x"}]),
        flag("g", [DEFAULT]),
    )
    assert s.names == ("f", "g")
    assert not s.is_enabled("f", {}) and s.is_enabled("g", {})
    odd_parent = snap(implementation, flag("child", [DEFAULT], dependencies=[{"feature": ["x"]}, "junk"]))
    assert odd_parent.warnings == () and not odd_parent.is_enabled("child", {})


# -------------------------------------------------------------------------------------- strategies


def test_disabled_strategies_are_skipped(implementation: str) -> None:
    # SPEC.md E2: a strategy with disabled: true is never evaluated.
    only_disabled = flag(
        "a", [{**constrained({"contextName": "userId", "operator": "IN", "values": ["x"]}), "disabled": True}]
    )
    disabled_default = flag(
        "b", [{**DEFAULT, "disabled": True}, {"name": "userWithId", "parameters": {"userIds": "7"}}]
    )
    s = snap(implementation, only_disabled, disabled_default)
    assert s.is_enabled("a", {"userId": "nobody"})
    assert not s.is_enabled("b", {"userId": "8"}) and s.is_enabled("b", {"userId": "7"})


@pytest.mark.parametrize("rollout", ["50.5", " 50", "", "-1", "abc"])
def test_a_rollout_that_is_not_a_plain_integer_never_matches(implementation: str, rollout: str) -> None:
    s = snap(implementation, flag("f", [{"name": "flexibleRollout", "parameters": {"rollout": rollout}}]))
    assert not any(s.is_enabled("f", {"userId": str(i)}) for i in range(50))
    assert s.warnings == ()


def test_flexible_rollout_without_group_hashes_with_the_flag_name(implementation: str) -> None:
    s = snap(implementation, flag("my-flag", [{"name": "flexibleRollout", "parameters": {"rollout": "50"}}]))
    for user, bucket in sdk_buckets("my-flag", map(str, range(40))).items():
        assert s.is_enabled("my-flag", {"userId": user}) is (bucket <= 50)


def test_gradual_rollouts_need_a_group(implementation: str) -> None:
    s = snap(
        implementation, flag("f", [{"name": "gradualRolloutUserId", "parameters": {"percentage": "100"}}])
    )
    assert not s.is_enabled("f", {"userId": "1"})


def test_custom_stickiness_missing_is_off_even_at_100_and_empty_is_a_value(implementation: str) -> None:
    rollout = {"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "tenant"}}
    s = snap(implementation, flag("f", [rollout]))
    assert not s.is_enabled("f", {"userId": "1"})
    assert s.is_enabled("f", {"properties": {"tenant": ""}})


def test_user_ids_are_trimmed_and_ips_support_cidr_and_ipv6(implementation: str) -> None:
    s = snap(
        implementation,
        flag("u", [{"name": "userWithId", "parameters": {"userIds": " a , b,,c"}}]),
        flag("ip", [{"name": "remoteAddress", "parameters": {"IPs": "10.0.0.0/8, 2001:db8::/32, junk"}}]),
    )
    assert s.is_enabled("u", {"userId": "b"}) and s.is_enabled("u", {"userId": ""})
    assert s.is_enabled("ip", {"remoteAddress": "10.1.2.3"})
    assert s.is_enabled("ip", {"remoteAddress": "2001:db8::1"})
    assert not s.is_enabled("ip", {"remoteAddress": "::ffff:10.1.2.3"})  # IPv4-mapped does not match IPv4
    assert not s.is_enabled("ip", {"remoteAddress": "10.1.2.3:80"})


def test_application_hostname_compares_lower_cased_names(implementation: str) -> None:
    feature = flag("h", [{"name": "applicationHostname", "parameters": {"hostNames": "Web-1, web-2"}}])
    on = compile_snapshot({"features": [feature]}, hostname="WEB-2", implementation=implementation)
    off = compile_snapshot({"features": [feature]}, hostname="db-1", implementation=implementation)
    assert on.is_enabled("h", {}) and not off.is_enabled("h", {})


def test_unknown_strategies_are_off(implementation: str) -> None:
    s = snap(implementation, flag("f", [{"name": "myCustomStrategy", "parameters": {}}]))
    assert not s.is_enabled("f", {})


# --------------------------------------------------------------------------------------- contexts


def test_context_normalisation(implementation: str) -> None:
    s = snap(
        implementation,
        flag("by-user", [{"name": "userWithId", "parameters": {"userIds": "42"}}]),
        flag("tier", [constrained({"contextName": "tier", "operator": "IN", "values": ["gold"]})]),
        flag("num", [constrained({"contextName": "n", "operator": "IN", "values": ["12", "1.5", "true"]})]),
    )
    assert s.is_enabled("by-user", {"properties": {"userId": "42"}})  # promoted from properties
    assert not s.is_enabled("by-user", {"userId": None, "properties": {"userId": "42"}})  # null: missing
    assert s.is_enabled("tier", {"tier": "gold", "properties": {"tier": "lead"}})  # top level wins
    for value in (12, 1.5, True):
        assert s.is_enabled("num", {"properties": {"n": value}})
    assert not s.is_enabled("num", {"properties": {"n": 12.0}})  # serde's text is "12.0"
    assert not s.is_enabled("tier", {"properties": {"tier": None}})


def test_variant_stickiness_current_time_reads_the_property_of_that_name(implementation: str) -> None:
    # Variant stickiness knows no currentTime field: it reads properties["currentTime"], which the top-level
    # currentTime leaves in place and which is promoted away when the top level has none.
    variants = [{"name": "a", "weight": 1, "stickiness": "currentTime"}, {"name": "b", "weight": 1}]
    s = snap(implementation, flag("f", variants=variants))
    for seed, bucket in sdk_buckets("f", ("x", "y", "z", "w"), 2, VARIANT_SEED).items():
        context = {"currentTime": "2024-01-01T00:00:00Z", "properties": {"currentTime": seed}}
        body, valid_in = s.evaluate_all_body(context)
        expected = "ab"[bucket - 1]
        assert json.loads(body)["toggles"][0]["variant"]["name"] == expected
        assert valid_in == CACHE_SNAPSHOT
    assert s.evaluate_all_body({"currentTime": "2024-01-01T00:00:00Z"})[1] == CACHE_NEVER
    assert s.evaluate_all_body({"properties": {"currentTime": "x"}})[1] == CACHE_NEVER


# ------------------------------------------------------------------------------------- operators


def check(implementation: str, constraint: dict[str, Any], value: Any, field: str = "x") -> bool:
    s = snap(implementation, flag("f", [constrained({"contextName": field, **constraint})]))
    return s.is_enabled("f", {} if value is None else {"properties": {field: value}})


def test_missing_fields_and_inversion(implementation: str) -> None:
    assert not check(implementation, {"operator": "IN", "values": ["a"]}, None)
    assert check(implementation, {"operator": "NOT_IN", "values": ["a"]}, None)
    assert check(implementation, {"operator": "IN", "values": ["a"], "inverted": True}, None)
    assert not check(implementation, {"operator": "NOT_IN", "values": ["a"], "inverted": True}, None)
    assert check(implementation, {"operator": "STR_CONTAINS", "values": ["a"], "inverted": True}, None)


def test_numbers_follow_rust(implementation: str) -> None:
    eq = {"operator": "NUM_EQ", "value": "0.3"}
    assert check(implementation, eq, "0.30000000000000004")  # within f64::EPSILON
    for text in ("", " 12", "0x10", "1_000"):
        assert not check(implementation, {"operator": "NUM_GT", "value": "0"}, text)
    assert check(implementation, {"operator": "NUM_GT", "value": "999"}, "+1e3")


def test_dates(implementation: str) -> None:
    after = {"operator": "DATE_AFTER", "value": "2024-01-01T00:00:00.000Z"}
    assert check(implementation, after, "2024-01-01 00:00:01Z")
    assert check(implementation, after, "2024-01-01T02:00:00.5+02:00")  # 00:00:00.5Z: offsets count
    assert not check(implementation, after, "2024-01-01T01:59:59+02:00")
    assert not check(implementation, after, "2024-06-01")  # no time, no offset
    assert not check(implementation, after, "2024-01-01T00:00:00.000Z")  # exclusive


def test_dates_with_fractions_compare_exactly(implementation: str) -> None:
    after = {"operator": "DATE_AFTER", "value": "2024-01-01T00:00:00.000Z"}
    assert check(implementation, after, "2024-01-01T00:00:00.000000001Z")


def test_semver(implementation: str) -> None:
    gt = {"operator": "SEMVER_GT", "value": "1.2.3"}
    assert check(implementation, gt, "1.10.0")
    assert not check(implementation, gt, "1.2.3-rc.1")
    assert not check(implementation, gt, "v2.0.0")
    assert not check(implementation, gt, " 2.0.0")
    assert not check(implementation, {"operator": "SEMVER_EQ", "value": "v1.2.3", "inverted": True}, "1.0.0")
    assert check(implementation, {"operator": "SEMVER_GT", "value": "2"}, "3")  # a number: numeric comparison


def test_regex_has_rust_semantics(implementation: str) -> None:
    assert check(implementation, {"operator": "REGEX", "value": r"^\w+$"}, "héllo")
    assert not check(implementation, {"operator": "REGEX", "value": "a$"}, "a\n")
    assert check(implementation, {"operator": "REGEX", "value": "(?m)a$"}, "a\nb")
    assert not check(implementation, {"operator": "REGEX", "value": "a(?=b)"}, "ab")
    assert check(implementation, {"operator": "REGEX", "value": "a(?=b)", "inverted": True}, "ab")
    assert not check(implementation, {"operator": "REGEX", "value": r"(a)\1"}, "aa")
    assert check(implementation, {"operator": "REGEX", "value": "[(?=]"}, "=")
    assert check(implementation, {"operator": "REGEX", "value": "AB", "caseInsensitive": True}, "xaby")


def test_in_cidr(implementation: str) -> None:
    cidr = {"operator": "IN_CIDR", "values": ["10.0.0.0/8", "nonsense"]}
    assert check(implementation, cidr, "10.9.9.9", field="remoteAddress")
    assert not check(implementation, cidr, "11.0.0.1", field="remoteAddress")


# --------------------------------------------------------------------------------------- variants


def test_zero_total_weight_gives_no_variant(implementation: str) -> None:
    s = snap(implementation, flag("f", variants=[{"name": "a", "weight": 0}, {"name": "b", "weight": 0}]))
    assert s.get_variant("f", {"userId": "1"}) == {
        "name": "disabled",
        "enabled": False,
        "feature_enabled": True,
    }


def test_an_override_wins_even_with_zero_weight(implementation: str) -> None:
    variants = [
        {"name": "a", "weight": 100},
        {"name": "b", "weight": 0, "overrides": [{"contextName": "userId", "values": ["7"]}]},
        {"name": "c", "weight": 0, "overrides": [{"contextName": "userId", "values": ["7"]}]},
    ]
    s = snap(implementation, flag("f", variants=variants))
    assert s.get_variant("f", {"userId": "7"})["name"] == "b"
    assert s.get_variant("f", {"userId": "8"})["name"] == "a"


def test_payloads_pass_through(implementation: str) -> None:
    payload = {"type": "number", "value": "1.5"}
    s = snap(implementation, flag("f", variants=[{"name": "a", "weight": 1, "payload": payload}]))
    assert s.get_variant("f", {"userId": "1"}) == {
        "name": "a",
        "enabled": True,
        "feature_enabled": True,
        "payload": payload,
    }


def test_dependency_on_a_parent_without_variants_accepts_any_variant_list(implementation: str) -> None:
    parent = flag("parent", [DEFAULT])
    child = flag("child", [DEFAULT], dependencies=[{"feature": "parent", "variants": ["foo"]}])
    assert snap(implementation, parent, child).is_enabled("child", {})


def test_a_parent_rollout_without_group_hashes_with_the_child_name(implementation: str) -> None:
    parent = flag("parent", [{"name": "flexibleRollout", "parameters": {"rollout": "50"}}])
    child = flag("child", [DEFAULT], dependencies=[{"feature": "parent"}])
    s = snap(implementation, parent, child)
    for user, bucket in sdk_buckets("child", map(str, range(40))).items():
        assert s.is_enabled("child", {"userId": user}) is (bucket <= 50)


# ---------------------------------------------------------------------------------- cache validity

AFTER_2020 = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2020-01-01T00:00:00Z"}


def _iso(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def test_an_answer_without_clock_or_randomness_holds_for_the_snapshot(implementation: str) -> None:
    s = snap(implementation, flag("f", [FLEX]), flag("g", [constrained(AFTER_2020)]))
    context = {"userId": "1", "currentTime": "2021-01-01T00:00:00Z"}
    assert s.evaluate_all_body(context) == (s.evaluate_all_body(context)[0], CACHE_SNAPSHOT)
    assert s.evaluate_all_body(context, True)[1] == CACHE_SNAPSHOT
    assert s.evaluate_named_body(context, ["f", "g", "unknown"])[1] == CACHE_SNAPSHOT


def test_reading_now_as_text_makes_an_answer_valid_for_that_second(implementation: str) -> None:
    starts_with_20 = {"contextName": "currentTime", "operator": "STR_STARTS_WITH", "values": ["20"]}
    s = snap(implementation, flag("f", [constrained(starts_with_20)]))
    before = int(time.time())
    body, valid_in = s.evaluate_all_body({"userId": "1"})
    after = int(time.time())
    assert isinstance(valid_in, int) and before <= valid_in <= after
    assert json.loads(body)["toggles"][0]["name"] == "f"
    before = int(time.time())
    valid_in = s.evaluate_named_body({}, ["f"])[1]
    assert before <= valid_in <= int(time.time())
    # A constraint with no values never reads the field, so it never reads the clock either.
    empty = snap(
        implementation,
        flag("f", [constrained({"contextName": "currentTime", "operator": "IN", "values": []})]),
    )
    assert empty.evaluate_all_body({})[1] == CACHE_SNAPSHOT


def test_a_date_compared_with_now_holds_until_the_date_passes(implementation: str) -> None:
    # Time only moves forward: a date in the past is decided for good, one ahead until its second.
    base = int(time.time())
    ahead, past = _iso(base + 100), "2020-01-01T00:00:00Z"
    cases = [
        ("DATE_AFTER", past, True, CACHE_SNAPSHOT),
        ("DATE_BEFORE", past, False, CACHE_SNAPSHOT),
        ("DATE_AFTER", ahead, False, base + 100),  # on from the first instant after base + 100
        ("DATE_BEFORE", ahead, True, base + 99),  # off from base + 100 itself
    ]
    for operator, value, on, valid_in in cases:
        for inverted in (False, True):
            constraint = {"contextName": "currentTime", "operator": operator, "value": value}
            constraint["inverted"] = inverted
            s = snap(implementation, flag("f", [constrained(constraint)]))
            assert s.is_enabled("f", {}) is (on != inverted), (operator, value, inverted)
            assert s.evaluate_all_body({})[1] == valid_in, (operator, value, inverted)
            assert s.evaluate_named_body({}, ["f"])[1] == valid_in
    # The nearest bound wins, and a text read of now bounds the answer to its second.
    soon = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": _iso(base + 50)}
    later = {"contextName": "currentTime", "operator": "DATE_BEFORE", "value": _iso(base + 80)}
    s = snap(implementation, flag("a", [constrained(soon)]), flag("b", [constrained(later)]))
    assert s.evaluate_all_body({})[1] == base + 50
    text = {"contextName": "currentTime", "operator": "STR_CONTAINS", "values": ["T"]}
    s = snap(implementation, flag("a", [constrained(soon)]), flag("t", [constrained(text)]))
    before = int(time.time())
    assert before <= s.evaluate_all_body({})[1] <= int(time.time())
    # A context with its own currentTime needs no clock at all.
    assert s.evaluate_all_body({"currentTime": _iso(base)})[1] == CACHE_SNAPSHOT


def test_one_evaluation_reads_the_clock_once(implementation: str) -> None:
    # Flags that reveal which second the dates and the text of "now" were taken from: all must agree
    # with each other and with valid_in, also when the clock ticks during the evaluation.
    now = int(time.time())
    seconds = range(now - 2, now + 4)
    features = []
    for second in seconds:
        date = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": _iso(second - 1)}
        text = {"contextName": "currentTime", "operator": "IN", "values": [_iso(second)]}
        features += [flag(f"date-{second}", [constrained(date)]), flag(f"text-{second}", [constrained(text)])]
        features += [flag(f"filler-{second}-{i}", [constrained(AFTER_2020)]) for i in range(50)]
    s = snap(implementation, *features)
    for _ in range(20):
        body, valid_in = s.evaluate_all_body({})
        on = {t["name"] for t in json.loads(body)["toggles"]}
        assert {n for n in on if n.startswith("text-")} == {f"text-{valid_in}"}
        assert {n for n in on if n.startswith("date-")} == {f"date-{x}" for x in seconds if x <= valid_in}


@pytest.mark.parametrize(
    "feature",
    [
        # default stickiness with neither userId nor sessionId: random
        flag("f", [{"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "default"}}]),
        flag("f", [{"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "random"}}]),
        flag("f", [{"name": "gradualRolloutRandom", "parameters": {"percentage": "50"}}]),
        flag("f", [DEFAULT], variants=[{"name": "a", "weight": 1}, {"name": "b", "weight": 1}]),
    ],
    ids=["default-stickiness", "random-stickiness", "random-rollout", "random-variant"],
)
def test_randomness_is_never_cached(implementation: str, feature: dict[str, Any]) -> None:
    now_as_text = {"contextName": "currentTime", "operator": "STR_STARTS_WITH", "values": ["20"]}
    s = snap(implementation, feature, flag("clock", [constrained(now_as_text)]))
    assert s.evaluate_all_body({})[1] == CACHE_NEVER
    assert s.evaluate_all_body({"currentTime": "2021-01-01T00:00:00Z"})[1] == CACHE_NEVER
    assert s.evaluate_named_body({}, ["f"])[1] == CACHE_NEVER
    assert s.evaluate_named_body({}, ["clock"])[1] > 0  # only what the evaluation used counts


@pytest.mark.parametrize(
    ("parameters", "on"),
    [
        ({"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "default"}}, True),
        ({"name": "flexibleRollout", "parameters": {"rollout": "100", "stickiness": "random"}}, True),
        ({"name": "flexibleRollout", "parameters": {"rollout": "0", "stickiness": "random"}}, False),
        ({"name": "gradualRolloutRandom", "parameters": {"percentage": "100"}}, True),
        ({"name": "gradualRolloutRandom", "parameters": {"percentage": "0"}}, False),
    ],
    ids=["full-default", "full-random", "zero-random", "random-100", "random-0"],
)
def test_full_and_zero_rollouts_need_no_randomness(implementation: str, parameters: dict, on: bool) -> None:
    # Whatever the draw, a full rollout is on and a zero one off: the answer is decided without it and may
    # be cached for the whole snapshot.
    s = snap(implementation, flag("f", [parameters]))
    for _ in range(20):
        assert s.is_enabled("f", {}) is on
    assert s.evaluate_all_body({})[1] == CACHE_SNAPSHOT
    assert s.evaluate_named_body({}, ["f"])[1] == CACHE_SNAPSHOT


def test_a_full_rollout_on_a_custom_field_still_needs_the_field(implementation: str) -> None:
    parameters = {"rollout": "100", "stickiness": "tenant", "groupId": "g"}
    s = snap(implementation, flag("f", [{"name": "flexibleRollout", "parameters": parameters}]))
    assert s.is_enabled("f", {"properties": {"tenant": "acme"}}) is True
    assert s.is_enabled("f", {}) is False


# -------------------------------------------------------------------------------------- the bodies


def test_named_body_is_byte_identical_to_the_node_proxy(implementation: str) -> None:
    s = compile_snapshot(sample_payload(), implementation=implementation)
    names = [
        "default-on",
        "disabled-feature",
        "does-not-exist",
        "impression-on",
        "impression-on-disabled",
        "feature-variants",
        "strategy-variants",
    ]
    context = {
        "userId": "u1",
        "sessionId": "s1",
        "properties": {"region": "eu"},
        "appName": "unleash-proxy",
        "environment": "default",
    }
    body, valid_in, outcomes = s.evaluate_named_body(context, names)
    assert body == recorded_body("""-d '{"toggles":["default-on","disabled-feature","does-not-exist\"""")
    assert valid_in == CACHE_SNAPSHOT
    assert outcomes[:3] == [
        ("default-on", True, "disabled"),
        ("disabled-feature", False, "disabled"),
        ("does-not-exist", False, "disabled"),
    ]
    dup, _, _ = s.evaluate_named_body({"userId": "u1"}, ["default-on", "default-on"])
    assert dup == recorded_body("""-d '{"toggles":["default-on","default-on"]""")


def test_list_bodies_omit_missing_impression_data_and_all_shows_disabled(implementation: str) -> None:
    s = snap(implementation, {"name": "bare", "enabled": True, "strategies": []}, flag("off", enabled=False))
    body, _ = s.evaluate_all_body({})
    assert body == (
        b'{"toggles":[{"name":"bare","enabled":true,"variant":{"name":"disabled","enabled":false,'
        b'"feature_enabled":true,"featureEnabled":true}}]}'
    )
    everything = json.loads(s.evaluate_all_body({}, True)[0])["toggles"]
    assert everything[1] == {
        "name": "off",
        "enabled": False,
        "variant": {"name": "disabled", "enabled": False, "feature_enabled": False},
    }
    assert s.evaluate_all({}) == json.loads(body)["toggles"]


def test_strategy_and_feature_variant_key_orders(implementation: str) -> None:
    strategy = {
        **DEFAULT,
        "variants": [{"name": "sv", "weight": 1, "payload": {"type": "string", "value": "x"}}],
    }
    s = snap(
        implementation,
        flag("s", [strategy]),
        flag("v", variants=[{"name": "fv", "weight": 1, "payload": {"type": "string", "value": "y"}}]),
    )
    body = s.evaluate_all_body({"userId": "1"})[0]
    assert b'{"name":"sv","enabled":true,"payload":{"type":"string","value":"x"},"feature_enabled"' in body
    assert b'{"name":"fv","payload":{"type":"string","value":"y"},"enabled":true,"feature_enabled"' in body


def test_unicode_names_are_escaped_and_hashed_as_utf8(implementation: str) -> None:
    name = 'Feature.UTF-8.😊_φriend_你好_🌍"quoted"'
    s = snap(implementation, flag(name, [{"name": "flexibleRollout", "parameters": {"rollout": "50"}}]))
    for user, bucket in sdk_buckets(name, ("😊", "φ" * 300, "plain")).items():
        assert s.is_enabled(name, {"userId": user}) is (bucket <= 50)
    assert json.loads(s.evaluate_all_body({}, True)[0])["toggles"][0]["name"] == name


def test_a_lone_surrogate_is_hashed_not_an_error(implementation: str) -> None:
    s = snap(implementation, flag("f", [{"name": "flexibleRollout", "parameters": {"rollout": "50"}}]))
    for user, bucket in sdk_buckets("f", ("\ud800", "a\udfff" * 100)).items():
        assert s.is_enabled("f", {"userId": user}) is (bucket <= 50)


def test_the_pure_murmur_hash_gives_the_published_values() -> None:
    for data, seed, expected in MURMUR3_VECTORS:
        assert _murmur_py.murmur3_32(data, seed) == expected, (data, seed)


def test_the_buckets_are_the_sdks(implementation: str) -> None:
    if implementation == "compiled":
        from flagproxy._eval import normalized_hash
    else:
        normalized_hash = _murmur_py.normalized_hash
    for group, ident, seed, bucket in PUBLISHED_BUCKETS:
        assert normalized_hash(group, ident, 100, seed) == bucket, (group, ident, seed)
    groups = ["g", "ab", "AB12A", "😊", "", "abc", "abcd", "abcde", "x\udc80"]  # every prefix length mod 4
    identifiers = ["1", "122", "φ" * 600, "", "ab", "abcdefg", "\ud800"]
    for group in groups:
        for seed, normalizer in ((0, 100), (VARIANT_SEED, 100), (VARIANT_SEED, 1000)):
            for ident, bucket in sdk_buckets(group, identifiers, normalizer, seed).items():
                assert normalized_hash(group, ident, normalizer, seed) == bucket, (group, ident, seed)


def test_a_delta_payload_exposes_its_hydrated_state(implementation: str) -> None:
    events = [
        {
            "eventId": 1,
            "type": "hydration",
            "features": [flag("a", [DEFAULT])],
            "segments": [{"id": 1, "constraints": []}],
        },
        {"eventId": 2, "type": "feature-updated", "feature": flag("b", [DEFAULT])},
    ]
    s = compile_snapshot({"events": events}, implementation=implementation)
    assert [f["name"] for f in s.state["features"]] == ["a", "b"]
    assert s.state["segments"] == [{"id": 1, "constraints": []}]
    full = {"version": 2, "features": [flag("a", [DEFAULT])]}
    assert compile_snapshot(full, implementation=implementation).state is full
