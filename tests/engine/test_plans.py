"""Plans in the compiled evaluator (flagproxy/_eval.pyx, Engine._plan_key): contexts whose plan constraints
answer alike share the flags those answers decide, and only the rest is walked per request. A plan is
built the second time its key is seen and used from then on, so each context here is evaluated three
times (walked in full, plan built, plan used) and every answer must equal the pure twin's, which has no
plans, in body and in validity.

A differential test: the other side is no oracle of what is right. Each evaluator is pinned on its own by
independent answers (tests/conformance: the client specification's cases for both; tests/engine/
test_semantics.py: published MurmurHash3 vectors and the Node SDK's buckets); this adds agreement on inputs
no fixed case covers."""

from __future__ import annotations

import calendar
import json
import time
from typing import Any

from benchmarks import datasets
from flagproxy.evaluator import CACHE_SNAPSHOT
from flagproxy.snapshot import compile_snapshot

LATER = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2999-01-01T00:00:00Z"}
PASSED = {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2020-01-01T00:00:00Z"}
DEFAULT = {"name": "default", "parameters": {}}


def flag(name: str, *strategies: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "enabled": True, "strategies": list(strategies), "variants": [], **extra}


def constrained(*constraints: dict[str, Any], name: str = "default", **parameters: str) -> dict[str, Any]:
    return {"name": name, "parameters": parameters, "constraints": list(constraints)}


def app_in(*apps: str) -> dict[str, Any]:
    return {"contextName": "appName", "operator": "IN", "values": list(apps)}


class Pair:
    """The compiled and the pure evaluator of one payload."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.compiled = compile_snapshot(payload, implementation="compiled")
        self.pure = compile_snapshot(payload, implementation="pure")
        self.engine = self.compiled.evaluate_all_body.__self__

    def toggles(self, context: dict[str, Any], include_disabled: bool = False) -> dict[str, Any]:
        """Three compiled answers, each equal to the pure twin's; the toggles by name."""
        for _ in range(3):
            body, valid_in = self.compiled.evaluate_all_body(context, include_disabled)
            expected_body, expected_valid_in = self.pure.evaluate_all_body(context, include_disabled)
            assert body == expected_body, context
            assert valid_in == expected_valid_in, context
        return {t["name"]: t for t in json.loads(body)["toggles"]}

    def stats(self) -> dict[str, Any]:
        return self.engine.plan_stats()


def payload(*features: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"version": 2, "features": list(features), **extra}


def test_the_benchmark_snapshot_answers_alike_through_plans() -> None:
    pair = Pair(datasets.snapshot_payload(1000))
    for i, base in enumerate(datasets.contexts(16)):
        # user-<n> ids are in the snapshot's userWithId lists and overrides; the others are not.
        for user in (f"someone-{i}", f"user-{i * 37 % 1000}", None):
            context = {k: v for k, v in base.items() if k != "userId"}
            if user is not None:
                context["userId"] = user
            pair.toggles(context)
            pair.toggles(context, include_disabled=True)
    stats = pair.stats()
    assert stats["planning"] and stats["built"] > 0 and stats["hits"] > 0
    # Plans decide most flags: what is walked is what needs a user's hash.
    assert max(stats["walked"]) < 1000 * 0.7


def test_users_share_the_plan_of_their_context() -> None:
    pair = Pair(
        payload(
            flag("web-only", constrained(app_in("web"))),
            flag("half", constrained(app_in("web"), name="flexibleRollout", rollout="50")),
        )
    )
    seen = {"half" in pair.toggles({"appName": "web", "userId": f"u{i}"}) for i in range(40)}
    assert seen == {True, False}  # the rollout is walked per user, not frozen into the plan
    assert "web-only" not in pair.toggles({"appName": "ios", "userId": "u1"})
    stats = pair.stats()
    assert stats["plans"] == 2 and stats["walked"] == [1, 0]  # ios: the rollout's constraint is false
    assert stats["hits"] == 40 * 3 - 2 + 1


def test_listed_user_ids_and_overrides_are_not_frozen_into_a_plan() -> None:
    override_variants = [
        {
            "name": "vip",
            "weight": 0,
            "weightType": "fix",
            "overrides": [{"contextName": "userId", "values": ["ann"]}],
        }
    ]
    pair = Pair(
        payload(
            flag("listed", {"name": "userWithId", "parameters": {"userIds": "ann, bob"}}),
            flag("vip", DEFAULT, variants=override_variants),
        )
    )
    assert "listed" not in pair.toggles({"userId": "zoe"})
    assert pair.toggles({"userId": "zoe"})["vip"]["variant"]["name"] == "disabled"
    assert "listed" in pair.toggles({"userId": "ann"})
    assert pair.toggles({"userId": "ann"})["vip"]["variant"]["name"] == "vip"
    # bob is listed too, so he shares ann's plan key: the lists are still read per user.
    assert "listed" in pair.toggles({"userId": "bob"})
    assert pair.toggles({"userId": "bob"})["vip"]["variant"]["name"] == "disabled"
    assert "listed" not in pair.toggles({"userId": "yan"})
    assert pair.stats()["plans"] == 2


def test_dependencies_are_decided_by_the_parents_constraints() -> None:
    pair = Pair(
        payload(
            flag("parent", constrained(app_in("web"))),
            flag("child", DEFAULT, dependencies=[{"feature": "parent", "enabled": True}]),
            flag("not-child", DEFAULT, dependencies=[{"feature": "parent", "enabled": False}]),
            flag("variant-child", DEFAULT, dependencies=[{"feature": "parent", "variants": ["x"]}]),
        )
    )
    for user in ("a", "b"):
        assert set(pair.toggles({"appName": "web", "userId": user})) == {"parent", "child", "variant-child"}
        assert set(pair.toggles({"appName": "ios", "userId": user})) == {"not-child"}
    assert pair.stats()["walked"] == [0, 0]


def test_the_clock_bounds_answers_through_plans_as_without() -> None:
    now_as_text = {"contextName": "currentTime", "operator": "STR_STARTS_WITH", "values": ["20"]}
    pair = Pair(
        payload(
            flag("passed", constrained(PASSED, app_in("web"))),
            flag("later", constrained(LATER)),
        )
    )
    for user in ("a", "b", "c"):
        toggles = pair.toggles({"appName": "web", "userId": user})
        assert "passed" in toggles and "later" not in toggles
    # A passed date is a plan constraint; a date ahead is walked and bounds the answer until it passes.
    assert pair.stats()["plan_constraints"] == 2
    assert pair.compiled.evaluate_all_body({"appName": "web"})[1] == calendar.timegm((2999, 1, 1, 0, 0, 0))
    text = Pair(payload(flag("passed", constrained(PASSED)), flag("text", constrained(now_as_text))))
    before = int(time.time())
    for user in ("a", "b", "c"):
        assert set(text.toggles({"userId": user})) == {"passed", "text"}
    valid_in = text.compiled.evaluate_all_body({"userId": "d"})[1]
    assert before <= valid_in <= int(time.time())
    assert text.compiled.evaluate_all_body({"userId": "d", "currentTime": "2021-01-01T00:00:00Z"})[1] == (
        CACHE_SNAPSHOT
    )


def test_plans_stay_within_their_bound() -> None:
    regions = [f"r{i}" for i in range(12)]
    features = [
        flag(f"f{i}", constrained({"contextName": "region", "operator": "IN", "values": [regions[i % 12]]}))
        for i in range(60)
    ]
    pair = Pair(payload(*features))
    pair.toggles({"properties": {"region": "r0"}})
    one_plan = pair.stats()["bytes"]  # every region's plan has the same shape
    pair.engine.plan_bytes_limit = 3 * one_plan
    for _ in range(2):
        for region in regions:
            assert len(pair.toggles({"properties": {"region": region}})) == 5
    stats = pair.stats()
    assert stats["built"] >= 24 and stats["plans"] == 3 and stats["bytes"] == 3 * one_plan
    pair.engine.plan_bytes_limit = 10  # smaller than any plan: built, used once, never kept
    pair.toggles({"properties": {"region": "r0"}})
    assert pair.stats()["plans"] <= 3


def test_a_snapshot_with_more_plan_constraints_than_flags_does_not_plan() -> None:
    regions = [{"contextName": "region", "operator": "IN", "values": [f"r{i}"]} for i in range(300)]
    strategies = [constrained(region) for region in regions]
    pair = Pair(payload(flag("many", *strategies)))
    assert "many" in pair.toggles({"properties": {"region": "r299"}, "userId": "a"})
    assert pair.stats()["planning"] is False and pair.stats()["built"] == 0


def test_a_walked_flag_skips_only_the_strategies_its_plan_rules_out() -> None:
    """A plan keeps, for each flag it leaves to walk, the strategies its constraints' answers do not rule
    out (Engine._plan_candidates). Ruled out is only what the walk would find false before reading
    anything else: a date still ahead read first is read (and bounds the answer) as without plans."""

    def rollout(*constraints: dict[str, Any], percent: str = "50") -> dict[str, Any]:
        return constrained(*constraints, name="flexibleRollout", rollout=percent, stickiness="default")

    users = {"name": "userWithId", "parameters": {"userIds": "ann"}}
    pair = Pair(
        payload(
            flag("ruled-out-first", rollout(app_in("ios")), rollout(app_in("web"), percent="30")),
            flag(
                "off-then-default",
                rollout(app_in("web"), percent="0"),
                rollout(percent="40"),
                constrained(app_in("ios")),
            ),
            flag("listed-then-rollout", users, rollout(app_in("web"))),
            flag("ahead-first", rollout(LATER, app_in("ios")), rollout(percent="60")),
            flag("ahead-after", rollout(app_in("ios"), LATER), rollout(percent="60")),
        )
    )
    seen: dict[str, set[bool]] = {}
    for app in ("web", "ios"):
        for user in ["ann", "bob"] + [f"u{i}" for i in range(30)]:  # no user: rollouts draw at random
            context = {"appName": app, "userId": user}
            toggles = pair.toggles(context)
            for name in pair.compiled.names:
                seen.setdefault(name, set()).add(name in toggles)
    assert all(answers == {True, False} for answers in seen.values()), seen
    assert pair.stats()["hits"] > 0


def test_quick_records_answer_as_the_walk_does() -> None:
    """A walked flag left one strategy whose constraints the plan decided hold (a default-stickiness
    rollout, or a strategy that holds whatever the user with only its variant left) is walked from its
    plan's quick record (Engine._quick_record). Its answers, with and without the disabled flags, equal
    the pure twin's: for user ids, for a session id alone, and for an identifier too long to split (the
    full walk then, as with no identifier, where randomness decides and the twins cannot be compared)."""

    def rollout(*constraints: dict[str, Any], percent: str = "50", **parameters: str) -> dict[str, Any]:
        return constrained(
            *constraints, name="flexibleRollout", rollout=percent, stickiness="default", **parameters
        )

    variants = [
        {"name": "blue", "weight": 500, "weightType": "variable", "stickiness": "default"},
        {"name": "red", "weight": 500, "weightType": "variable", "stickiness": "default"},
    ]
    pair = Pair(
        payload(
            flag("rollout", rollout(app_in("web"))),
            flag("grouped", rollout(app_in("web"), percent="30", groupId="shared")),
            flag("with-variants", rollout(percent="70"), variants=variants),
            flag("always-with-variants", constrained(app_in("web")), variants=variants),
            flag("off", rollout(percent="60"), enabled=False),
        )
    )
    seen: dict[str, set[bool]] = {}
    identities: list[dict[str, str]] = [{"userId": f"u{i}"} for i in range(40)]
    identities += [{"sessionId": f"s{i}"} for i in range(20)]
    identities += [{"userId": "x" * 65 + str(i)} for i in range(20)]
    for identity in identities:
        context = {"appName": "web", **identity}
        toggles = pair.toggles(context)
        pair.toggles(context, include_disabled=True)
        for name in ("rollout", "grouped", "with-variants"):
            seen.setdefault(name, set()).add(name in toggles)
    assert all(answers == {True, False} for answers in seen.values()), seen
    stats = pair.stats()
    assert stats["hits"] > 0 and max(stats["quick"]) == 4  # every enabled flag of the web plans
