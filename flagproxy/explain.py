"""Why a flag is on or off for a context: the playground's evaluator.

It compiles the payload with the engine's own compiler (flagproxy/compiler) and walks the compiled model
with the pure evaluator's own functions (flagproxy/_eval_py.py), so its answers are the engine's; it only
walks further than the engine needs to (every constraint of every strategy, not just up to the first that
fails) and writes down what it saw: each constraint's result with the context value it compared, the
segments, the rollout bucket against the percentage, the dependency on a parent, and which strategy decided.
tests/engine/test_explain.py holds its on/off and variant answers equal to the compiled evaluator's for the
benchmark snapshots.

This is cold-path code (the playground, one request at a time); the proxy never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flagproxy import _eval_py as pure
from flagproxy._murmur_py import normalized_hash
from flagproxy.compiler import model as m
from flagproxy.compiler.build import build_flags

_KIND_NAMES = {
    m.STRATEGY_CONSTANT: "decided without the context",
    m.STRATEGY_UNKNOWN: "unknown strategy: off",
    m.STRATEGY_CUSTOM: "custom strategy",
}


def _context_value(c: m.Constraint, ctx: pure.Context) -> str | None:
    """What a constraint compared: the context's value (now, for a missing currentTime)."""
    return ctx.lookup(c.field, c.prop)


def _constraint(spec: Mapping[str, Any], compiled: m.Constraint, ctx: pure.Context) -> dict[str, Any]:
    result = pure._constraint_holds(compiled, ctx)
    shown = {key: spec[key] for key in ("contextName", "operator", "values", "value") if key in spec}
    shown["inverted"] = bool(spec.get("inverted", False))
    shown["caseInsensitive"] = bool(spec.get("caseInsensitive", False))
    shown["values"] = list(spec.get("values") or [])
    shown["result"] = result
    shown["contextValue"] = _context_value(compiled, ctx)
    return shown


def _rollout(strategy: m.Strategy, ctx: pure.Context, flag_name: str) -> tuple[bool, dict[str, Any]]:
    """A flexibleRollout's or gradual rollout's decision: the bucket its seed hashes to against the
    percentage (the same hash and comparison as the evaluator's `_condition_holds`)."""
    if strategy.kind == m.STRATEGY_FLEXIBLE_ROLLOUT:
        seed = pure._rollout_seed(strategy, ctx)
        group = strategy.group if strategy.group is not None else flag_name
    else:
        field = m.FIELD_USER_ID if strategy.kind == m.STRATEGY_GRADUAL_USER_ID else m.FIELD_SESSION_ID
        seed = ctx.fields[field]
        group = strategy.group  # type: ignore[assignment]
    detail: dict[str, Any] = {"groupId": group, "seed": seed, "percentage": strategy.percentage}
    if seed is None:
        detail["bucket"] = None
        return False, detail
    bucket = normalized_hash(group, seed, m.ROLLOUT_MODULUS)
    detail["bucket"] = bucket
    return bucket <= strategy.percentage, detail


def _condition(strategy: m.Strategy, ctx: pure.Context, flag_name: str) -> tuple[bool, dict[str, Any]]:
    if strategy.kind in (
        m.STRATEGY_FLEXIBLE_ROLLOUT,
        m.STRATEGY_GRADUAL_USER_ID,
        m.STRATEGY_GRADUAL_SESSION_ID,
    ):
        return _rollout(strategy, ctx, flag_name)
    detail: dict[str, Any] = {}
    if strategy.kind in _KIND_NAMES:
        detail["note"] = _KIND_NAMES[strategy.kind]
    if strategy.kind == m.STRATEGY_USER_WITH_ID:
        detail["userId"] = ctx.fields[m.FIELD_USER_ID]
    if strategy.kind == m.STRATEGY_REMOTE_ADDRESS:
        detail["remoteAddress"] = ctx.fields[m.FIELD_REMOTE_ADDRESS]
    return pure._condition_holds(strategy, ctx, flag_name), detail


def _strategy(
    spec: Mapping[str, Any],
    compiled: m.Strategy,
    segments: Mapping[int, Mapping[str, Any]],
    ctx: pure.Context,
    flag_name: str,
) -> dict[str, Any]:
    own = list(spec.get("constraints") or [])
    constraints = [_constraint(c, compiled.constraints[i], ctx) for i, c in enumerate(own)]
    at = len(own)
    shown_segments = []
    for segment_id in spec.get("segments") or []:
        segment = segments.get(segment_id, {})
        specs = list(segment.get("constraints") or [])
        checked = [_constraint(c, compiled.constraints[at + i], ctx) for i, c in enumerate(specs)]
        at += len(specs)
        shown_segments.append(
            {
                "id": segment_id,
                "name": segment.get("name", str(segment_id)),
                "result": all(c["result"] for c in checked),
                "constraints": checked,
            }
        )
    constraints_hold = all(c["result"] for c in constraints) and all(s["result"] for s in shown_segments)
    explained: dict[str, Any] = {
        "name": spec.get("name"),
        "parameters": dict(spec.get("parameters") or {}),
        "constraints": constraints,
        "segments": shown_segments,
    }
    if constraints_hold:
        # Only now, as the evaluator does: a rollout that is not reached draws no random number.
        enabled, explained["condition"] = _condition(compiled, ctx, flag_name)
    else:
        enabled, explained["condition"] = False, {"note": "not evaluated: a constraint or segment failed"}
    explained["enabled"] = enabled
    return explained


def _variant(flag: m.Flag, chosen: m.Variant | None) -> dict[str, Any]:
    if chosen is None:
        return {"name": "disabled", "enabled": False}
    name, payload, _ = flag.outcomes[chosen.outcome]
    variant: dict[str, Any] = {"name": name, "enabled": True}
    if payload is not None:
        variant["payload"] = payload
    return variant


def explain(payload: Mapping[str, Any], context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every feature of a client API payload, evaluated for `context`, with the reasons.

    Each item: `name`, `enabled` (the flag's switch in the payload's environment), `isEnabled` (the
    answer), `variant` ({name, enabled, payload?}), `strategies` (each with `enabled`, `constraints`,
    `segments`, `condition`), `decidedBy` (the index of the strategy that decided, or None),
    `dependencies` (each parent with whether it held), `reason` (one sentence) and `broken` (a compile
    problem that keeps the flag off)."""
    flags, warnings = build_flags(payload)
    engine = pure.Engine(flags)
    segments = {s["id"]: s for s in payload.get("segments") or [] if isinstance(s, Mapping)}
    specs: dict[str, Mapping[str, Any]] = {}
    for feature in payload.get("features") or []:
        specs[feature["name"]] = feature
    ctx = pure.Context(context)
    answers = []
    for flag in flags:
        spec = specs[flag.name]
        strategy_specs = [s for s in spec.get("strategies") or [] if not s.get("disabled")]
        explained_strategies = []
        if not flag.broken:
            explained_strategies = [
                _strategy(s, compiled, segments, ctx, flag.name)
                for s, compiled in zip(strategy_specs, flag.strategies, strict=True)
            ]
        dependencies = []
        for spec_dep, dep in zip(spec.get("dependencies") or [], flag.dependencies, strict=False):
            dependencies.append(
                {
                    "feature": spec_dep.get("feature"),
                    "enabled": dep.enabled,
                    "variants": sorted(dep.variants) if dep.variants else [],
                    "result": engine._dependency_holds(dep, ctx, flag.name),
                }
            )
        decided = next((i for i, s in enumerate(explained_strategies) if s["enabled"]), None)
        matched = flag.strategies[decided] if decided is not None else None
        if not flag.enabled:
            on, reason = False, "the flag is off in this environment"
        elif flag.broken:
            on, reason = False, "the flag could not be compiled: " + _warning_for(flag.name, warnings)
        elif not all(d["result"] for d in dependencies):
            on, reason = False, "a parent dependency is not satisfied"
        elif decided is not None:
            on, reason = True, f"strategy {decided + 1} ({explained_strategies[decided]['name']}) matched"
        elif not flag.has_strategies:
            on, reason = True, "the flag is on and has no strategies"
        else:
            on, reason = False, "no strategy matched"
        chosen = pure._pick_variant(pure._variant_list(flag, matched), ctx) if on else None
        answers.append(
            {
                "name": flag.name,
                "enabled": flag.enabled,
                "isEnabled": on,
                "variant": _variant(flag, chosen),
                "strategies": explained_strategies,
                "decidedBy": decided if on else None,
                "dependencies": dependencies,
                "reason": reason,
                "broken": flag.broken,
            }
        )
    return answers


def _warning_for(name: str, warnings: list[str]) -> str:
    return next((w for w in warnings if f"flag {name!r}" in w), "see the server log")
