"""Deterministic snapshots and contexts shaped like real use, for the benchmarks.

`snapshot_payload(n)` is a client API payload (version 2) of n flags: mostly flexibleRollout with
constraints (IN / NOT_IN on appName, environment and properties, STR_STARTS_WITH on an email, NUM_GT, a
few SEMVER_GTE and DATE_AFTER), segments, feature variants with JSON and string payloads (some with
overrides), strategy variants, some dependencies on earlier flags, some disabled flags and userWithId /
default strategies. The same n always gives the same bytes. `contexts(k)` gives k rotating contexts
(and `unique_context(i)` one per request) like a browser SDK sends them.
"""

from __future__ import annotations

import random
from typing import Any

REGIONS = ["eu-west", "eu-north", "us-east", "us-west", "ap-south", "sa-east"]
APPS = ["web", "ios", "android", "checkout"]
PLANS = ["free", "pro", "team", "enterprise"]


def _constraint(rng: random.Random) -> dict[str, Any]:
    pick = rng.random()
    if pick < 0.30:
        return {"contextName": "appName", "operator": "IN", "values": rng.sample(APPS, rng.randint(1, 3))}
    if pick < 0.50:
        return {"contextName": "region", "operator": "IN", "values": rng.sample(REGIONS, rng.randint(1, 4))}
    if pick < 0.60:
        return {"contextName": "plan", "operator": "NOT_IN", "values": rng.sample(PLANS, 1)}
    if pick < 0.70:
        return {"contextName": "environment", "operator": "IN", "values": ["production", "staging"]}
    if pick < 0.80:
        return {
            "contextName": "email",
            "operator": "STR_ENDS_WITH",
            "values": ["@example.com", "@corp.example"],
            "caseInsensitive": True,
        }
    if pick < 0.90:
        return {"contextName": "age", "operator": "NUM_GT", "value": str(rng.randint(10, 60))}
    if pick < 0.97:
        return {"contextName": "appVersion", "operator": "SEMVER_GTE", "value": f"2.{rng.randint(0, 9)}.0"}
    return {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2024-01-01T00:00:00.000Z"}


def _variants(rng: random.Random, name: str, strategy_level: bool) -> list[dict[str, Any]]:
    count = rng.randint(2, 4)
    variants = []
    for i in range(count):
        variant: dict[str, Any] = {
            "name": f"{name}-v{i}",
            "weight": 1000 // count + (1000 % count if i == 0 else 0),
            "weightType": "variable",
            "stickiness": "default",
        }
        if rng.random() < 0.7:
            if rng.random() < 0.5:
                variant["payload"] = {
                    "type": "json",
                    "value": f'{{"color":"c{i}","limit":{rng.randint(1, 99)}}}',
                }
            else:
                variant["payload"] = {"type": "string", "value": f"copy-{i}"}
        if not strategy_level and i == 0 and rng.random() < 0.3:
            variant["overrides"] = [{"contextName": "userId", "values": ["user-1", "user-2"]}]
        variants.append(variant)
    return variants


def _strategy(rng: random.Random, name: str, segment_ids: list[int]) -> dict[str, Any]:
    pick = rng.random()
    if pick < 0.75:
        strategy: dict[str, Any] = {
            "name": "flexibleRollout",
            "parameters": {
                "rollout": str(rng.choice([5, 10, 25, 50, 75, 100, 100])),
                "stickiness": "default",
                "groupId": name,
            },
            "constraints": [_constraint(rng) for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))],
        }
    elif pick < 0.88:
        strategy = {
            "name": "userWithId",
            "parameters": {"userIds": ",".join(f"user-{rng.randint(0, 999)}" for _ in range(5))},
            "constraints": [],
        }
    else:
        strategy = {"name": "default", "parameters": {}, "constraints": [_constraint(rng)]}
    if rng.random() < 0.25:
        strategy["segments"] = rng.sample(segment_ids, rng.randint(1, 2))
    if rng.random() < 0.12:
        strategy["variants"] = _variants(rng, name + "-s", strategy_level=True)
    return strategy


def snapshot_payload(n: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed * 1_000_003 + n)
    segment_ids = list(range(1, 11))
    segments = [
        {
            "id": sid,
            "name": f"segment-{sid}",
            "constraints": [_constraint(rng) for _ in range(rng.randint(1, 2))],
        }
        for sid in segment_ids
    ]
    features: list[dict[str, Any]] = []
    for i in range(n):
        name = f"flag-{i:05d}.{rng.choice(['checkout', 'search', 'profile', 'feed', 'billing'])}"
        feature: dict[str, Any] = {
            "name": name,
            "type": rng.choice(["release", "experiment", "operational", "kill-switch"]),
            "description": f"Benchmark flag {i}",
            "project": "default",
            "enabled": rng.random() > 0.1,
            "stale": False,
            "impressionData": rng.random() < 0.2,
            "strategies": [_strategy(rng, name, segment_ids) for _ in range(rng.choice([1, 1, 1, 2, 3]))],
            "variants": _variants(rng, name, strategy_level=False) if rng.random() < 0.25 else [],
            "dependencies": [],
        }
        if i > 10 and rng.random() < 0.05:
            parent = features[rng.randrange(0, i)]
            if not parent["dependencies"]:
                feature["dependencies"] = [{"feature": parent["name"], "enabled": True}]
        features.append(feature)
    return {
        "version": 2,
        "features": features,
        "segments": segments,
        "query": {"inlineSegmentConstraints": False},
    }


def unique_context(i: int) -> dict[str, Any]:
    """The i-th of an endless stream of distinct contexts (a browser SDK's shape)."""
    rng = random.Random(i)
    return {
        "appName": APPS[i % len(APPS)],
        "environment": "production",
        "userId": f"user-{i}",
        "sessionId": f"session-{rng.randrange(10**9)}",
        "properties": {
            "region": REGIONS[i % len(REGIONS)],
            "plan": PLANS[i % len(PLANS)],
            "email": f"person{i}@{'example.com' if i % 3 else 'mail.test'}",
            "age": str(18 + i % 50),
            "appVersion": f"{1 + i % 3}.{i % 10}.{i % 7}",
        },
    }


def contexts(k: int) -> list[dict[str, Any]]:
    return [unique_context(i) for i in range(k)]
